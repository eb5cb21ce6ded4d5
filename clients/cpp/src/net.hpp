// Socket helpers of the client (internal): the transport of one connection
// (a non-blocking socket, with TLS over it when the Client has TLS), TCP
// connect with a deadline and the hello handshake, with not_leader
// following over an address list.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "tickwheel/tickwheel.hpp"

namespace tickwheel::detail {

class TlsContext;

/// Conn is one connection's transport: a connected non-blocking socket and,
/// with TLS, its TLS session (OpenSSL's SSL over the socket; src/tls.cpp).
/// Owned by one thread at a time: dial's caller, then the I/O thread. Never
/// raises SIGPIPE (writes use MSG_NOSIGNAL, TLS's too).
class Conn {
 public:
  /// What read and write return besides a byte count.
  static constexpr ssize_t kAgain = -1;  ///< nothing possible now: poll for read_events() / write_events()
  static constexpr ssize_t kError = -2;  ///< the connection failed: error() says why

  Conn();
  explicit Conn(int fd);  ///< takes a connected non-blocking socket (or -1)
  Conn(Conn&& o) noexcept;
  Conn& operator=(Conn&& o) noexcept;
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn();

  int fd() const { return fd_; }
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
  int fd_ = -1;
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

/// close_fd closes a socket, ignoring errors.
void close_fd(int fd) noexcept;

}  // namespace tickwheel::detail
