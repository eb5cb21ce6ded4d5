// Socket helpers of the client (internal): the transport of one connection
// (a non-blocking socket, with TLS over it when the Client has TLS), TCP
// connect with a deadline and the hello handshake, with not_leader
// following over an address list.
#pragma once

#ifdef _WIN32
#ifndef _WIN32_WINNT
#define _WIN32_WINNT 0x0600  // Vista: WSAPoll, inet_pton
#endif
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <winsock2.h>
#include <ws2tcpip.h>
#ifdef _MSC_VER
#include <BaseTsd.h>
typedef SSIZE_T ssize_t;
#endif
#else
#include <poll.h>
#include <sys/types.h>
#endif

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "tickwheel/tickwheel.hpp"

namespace tickwheel::detail {

// Platform helpers (src/net.cpp): the only place that knows how sockets,
// the wake channel and socket errors differ between Linux, other POSIX
// systems (macOS, the BSDs) and Windows (Winsock2). Features are tested
// with their macros (SOCK_NONBLOCK, MSG_NOSIGNAL, SO_NOSIGPIPE, ...), not
// by OS name, except Winsock itself (_WIN32).

#ifdef _WIN32
using socket_t = SOCKET;                          ///< a Winsock socket handle
inline const socket_t kNoSocket = INVALID_SOCKET;  ///< no socket
#else
using socket_t = int;             ///< a file descriptor
inline const socket_t kNoSocket = -1;  ///< no socket
#endif

/// net_init starts the socket library once per process (WSAStartup on
/// Windows; nothing elsewhere). Thread-safe; false (and err) when it failed.
bool net_init(std::string& err);

/// open_socket makes a socket that is non-blocking, not inherited by child
/// processes (close-on-exec; on Windows not inheritable), and never raises
/// SIGPIPE (SO_NOSIGPIPE where sends cannot say MSG_NOSIGNAL). kNoSocket
/// and last_error() on failure.
socket_t open_socket(int family, int type, int protocol);

/// close_fd closes a socket, ignoring errors; kNoSocket is ignored.
void close_fd(socket_t fd) noexcept;

/// sock_send / sock_recv: send (never raising SIGPIPE) and recv on a
/// socket; a count, or -1 and last_error().
ssize_t sock_send(socket_t fd, const void* buf, std::size_t n);
ssize_t sock_recv(socket_t fd, void* buf, std::size_t n);

/// poll_sockets: poll() (WSAPoll on Windows) on n sockets; the count ready,
/// 0 on timeout, -1 and last_error() on failure.
int poll_sockets(pollfd* fds, std::size_t n, int timeout_ms);

/// last_error: the calling thread's last socket error (errno, or
/// WSAGetLastError on Windows) as a std::error_code whose message() says
/// what happened.
std::error_code last_error();
/// would_block: ec means "try again later" (EAGAIN, EWOULDBLOCK, EINTR;
/// WSAEWOULDBLOCK, WSAEINTR), not a failed connection.
bool would_block(const std::error_code& ec);

/// WakePipe lets other threads wake the I/O thread out of poll_sockets: a
/// non-blocking pipe on POSIX (pipe2, else pipe + fcntl), a connected
/// loopback TCP pair on Windows (WSAPoll polls sockets only). Owned by the
/// Client; signal() may be called from any thread.
class WakePipe {
 public:
  WakePipe();  ///< ok() says whether it could be made
  ~WakePipe();
  WakePipe(const WakePipe&) = delete;
  WakePipe& operator=(const WakePipe&) = delete;
  bool ok() const { return rd_ != kNoSocket; }
  socket_t read_end() const { return rd_; }  ///< poll it for POLLIN
  void signal() noexcept;                    ///< makes read_end readable
  void drain() noexcept;                     ///< reads all that signal() wrote

 private:
  socket_t rd_ = kNoSocket, wr_ = kNoSocket;
};

class TlsContext;

/// Conn is one connection's transport: a connected non-blocking socket and,
/// with TLS, its TLS session (OpenSSL's SSL over the socket; src/tls.cpp).
/// Owned by one thread at a time: dial's caller, then the I/O thread. Never
/// raises SIGPIPE (writes go through sock_send, TLS's too).
class Conn {
 public:
  /// What read and write return besides a byte count.
  static constexpr ssize_t kAgain = -1;  ///< nothing possible now: poll for read_events() / write_events()
  static constexpr ssize_t kError = -2;  ///< the connection failed: error() says why

  Conn();
  explicit Conn(socket_t fd);  ///< takes a connected non-blocking socket (or kNoSocket)
  Conn(Conn&& o) noexcept;
  Conn& operator=(Conn&& o) noexcept;
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn();

  socket_t fd() const { return fd_; }
  bool tls() const { return tls_ != nullptr; }
  /// read reads up to n bytes: a count > 0, 0 when the peer closed the
  /// connection, kAgain, or kError. With TLS it reads every whole record
  /// the socket holds, up to n bytes.
  ssize_t read(void* buf, std::size_t n);
  /// write writes up to n bytes of buf: a count > 0, kAgain, or kError.
  /// After kAgain with TLS, the next write must start with the same bytes
  /// (more may follow; the buffer may have moved).
  ssize_t write(const void* buf, std::size_t n);
  /// The poll events the next read / write waits for: POLLIN / POLLOUT,
  /// except when TLS needs the other direction first.
  short read_events() const;
  short write_events() const;
  /// buffered: decrypted bytes wait in the TLS session, which poll does not
  /// see: read without waiting.
  bool buffered() const;
  /// error: why the last kError (or a TLS handshake) failed; tls_error:
  /// whether TLS said so (a certificate, an alert), not the network.
  const std::string& error() const { return err_; }
  /// awaits_verdict: a TLS 1.3 handshake in which the server asked for a
  /// client certificate ended on this side, and the server has not said yet
  /// whether it accepts the certificate: it says so after the client's
  /// handshake ends, with an alert or with a session ticket (a Go server
  /// sends one). Writing before then races the server's close: its alert
  /// can be lost to a reset, so the hello waits for the verdict first.
  bool awaits_verdict() const;
  bool tls_error() const { return tls_err_; }
  void close() noexcept;

  struct Tls;  ///< the TLS session (src/tls.cpp)

 private:
  friend class TlsContext;
  socket_t fd_ = kNoSocket;
  std::unique_ptr<Tls> tls_;
  std::string err_;
  bool tls_err_ = false;
  bool read_wants_write_ = false, write_wants_read_ = false;
  ssize_t sticky_ = 1;  ///< a close (0) or kError met after data: the next read's result
};

/// TlsContext is the Client's TLS configuration, loaded once from
/// TlsOptions (OpenSSL's SSL_CTX), shared by every connection it dials.
class TlsContext {
 public:
  /// make loads o's files; the error (tls_failed) names the file at fault.
  /// Fails when the library was built without TLS.
  static Result<std::shared_ptr<TlsContext>> make(const TlsOptions& o);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  /// handshake runs the TLS handshake on c (a plain connected socket) by
  /// the deadline, checking the server's certificate against the CA and
  /// the name (server_name, else host). On failure c.error() names addr
  /// and the cause.
  bool handshake(Conn& c, const std::string& addr, const std::string& host,
                 std::chrono::steady_clock::time_point deadline) const;

 private:
  TlsContext() = default;
  void* ctx_ = nullptr;  ///< SSL_CTX*
  std::string server_name_;
  bool has_cert_ = false;
};

/// Dialed is a connection that said hello: its transport and the hello result.
struct Dialed {
  Conn conn;
  HelloInfo hello;
  std::string addr;
};

/// split_addresses flattens "a:1,b:2" elements into one list.
std::vector<std::string> split_addresses(const std::vector<std::string>& in);

/// dial tries `first` (when not empty), then each address of the list:
/// connects (with TLS when tls is not null), says hello, follows not_leader
/// naming a leader at most max_redirects times in a row from each. Fails
/// with the server's error for unauthorized / unsupported_version (no other
/// node would say otherwise), else connect_failed naming the last failure
/// (tls_failed when that was TLS's).
Result<Dialed> dial(const std::vector<std::string>& addrs, const std::string& first, const Options& o,
                    const TlsContext* tls);

/// tls_built: the library was compiled with TLS (TICKWHEEL_HAVE_TLS).
bool tls_built();

}  // namespace tickwheel::detail
