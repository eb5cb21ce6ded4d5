#include "net.hpp"

#ifndef _WIN32
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

namespace tickwheel::detail {

// ---- platform helpers (net.hpp): the one place that differs by platform ----

#ifdef _WIN32

namespace {
const std::error_category& winsock_category();
}  // namespace

bool net_init(std::string& err) {
  static std::once_flag once;
  static int rc = 0;
  // Never WSACleanup: other code of the process may use Winsock too, and
  // the library stays started until the process ends.
  std::call_once(once, [] {
    WSADATA wsa;
    rc = WSAStartup(MAKEWORD(2, 2), &wsa);
  });
  if (rc != 0) err = "WSAStartup: " + std::error_code(rc, winsock_category()).message();
  return rc == 0;
}

namespace {
// WinsockCategory: Winsock's error codes (WSAGetLastError), their messages
// from FormatMessage (libstdc++'s system_category may not know them), and
// the portable std::errc they correspond to, so `ec == std::errc::...`
// works as on POSIX.
class WinsockCategory : public std::error_category {
 public:
  const char* name() const noexcept override { return "winsock"; }
  std::string message(int ev) const override {
    char buf[512];
    DWORD n = FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, nullptr,
                             static_cast<DWORD>(ev), 0, buf, sizeof buf, nullptr);
    while (n > 0 && (buf[n - 1] == '\r' || buf[n - 1] == '\n' || buf[n - 1] == '.' || buf[n - 1] == ' ')) n--;
    return n > 0 ? std::string(buf, n) : "Winsock error " + std::to_string(ev);
  }
  std::error_condition default_error_condition(int ev) const noexcept override {
    switch (ev) {
      case WSAEWOULDBLOCK: return std::errc::operation_would_block;
      case WSAEINPROGRESS: return std::errc::operation_in_progress;
      case WSAEINTR: return std::errc::interrupted;
      case WSAECONNREFUSED: return std::errc::connection_refused;
      case WSAECONNRESET: return std::errc::connection_reset;
      case WSAECONNABORTED: return std::errc::connection_aborted;
      case WSAETIMEDOUT: return std::errc::timed_out;
      case WSAENETUNREACH: return std::errc::network_unreachable;
      case WSAEHOSTUNREACH: return std::errc::host_unreachable;
      case WSAENOTCONN: return std::errc::not_connected;
      case WSAESHUTDOWN: return std::errc::broken_pipe;
      case WSAEADDRNOTAVAIL: return std::errc::address_not_available;
      case WSAEAFNOSUPPORT: return std::errc::address_family_not_supported;
      case WSAEMFILE: return std::errc::too_many_files_open;
      case WSAENOBUFS: return std::errc::no_buffer_space;
      default: return std::error_condition(ev, *this);
    }
  }
};

const std::error_category& winsock_category() {
  static const WinsockCategory c;
  return c;
}
}  // namespace

std::error_code last_error() {
  // Read the code first: winsock_category()'s first call (a guarded static,
  // TlsGetValue inside) resets the thread's last error to 0 (seen under Wine:
  // a refused connect said "Success").
  const int e = WSAGetLastError();
  return std::error_code(e, winsock_category());
}

bool would_block(const std::error_code& ec) {
  return ec.category() == winsock_category() && (ec.value() == WSAEWOULDBLOCK || ec.value() == WSAEINTR);
}

namespace {
bool in_progress(const std::error_code& ec) { return ec.value() == WSAEWOULDBLOCK || ec.value() == WSAEINPROGRESS; }
void set_error(int e) { WSASetLastError(e); }
int timed_out_code() { return WSAETIMEDOUT; }
}  // namespace

socket_t open_socket(int family, int type, int protocol) {
  // WSA_FLAG_NO_HANDLE_INHERIT: not inherited by child processes (close-on-exec).
  SOCKET s = WSASocketW(family, type, protocol, nullptr, 0, WSA_FLAG_OVERLAPPED | WSA_FLAG_NO_HANDLE_INHERIT);
  if (s == INVALID_SOCKET) return kNoSocket;
  u_long on = 1;
  if (ioctlsocket(s, FIONBIO, &on) != 0) {
    int e = WSAGetLastError();
    closesocket(s);
    WSASetLastError(e);
    return kNoSocket;
  }
  return s;  // Windows has no SIGPIPE
}

void close_fd(socket_t fd) noexcept {
  if (fd != kNoSocket) closesocket(fd);
}

ssize_t sock_send(socket_t fd, const void* buf, std::size_t n) {
  int len = n > 0x7fffffff ? 0x7fffffff : static_cast<int>(n);
  int w = ::send(fd, static_cast<const char*>(buf), len, 0);
  return w == SOCKET_ERROR ? -1 : w;
}

ssize_t sock_recv(socket_t fd, void* buf, std::size_t n) {
  int len = n > 0x7fffffff ? 0x7fffffff : static_cast<int>(n);
  int got = ::recv(fd, static_cast<char*>(buf), len, 0);
  return got == SOCKET_ERROR ? -1 : got;
}

int poll_sockets(pollfd* fds, std::size_t n, int timeout_ms) {
  return WSAPoll(fds, static_cast<ULONG>(n), timeout_ms);
}

// On Windows the wake channel is a loopback TCP connection: WSAPoll polls
// sockets only, and Windows has no socketpair.
WakePipe::WakePipe() {
  std::string err;
  if (!net_init(err)) return;
  SOCKET lis = open_socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
  if (lis == INVALID_SOCKET) return;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  int alen = sizeof a;
  SOCKET wr = INVALID_SOCKET, rd = INVALID_SOCKET;
  bool ok = ::bind(lis, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(lis, 1) == 0 &&
            getsockname(lis, reinterpret_cast<sockaddr*>(&a), &alen) == 0;
  if (ok) wr = open_socket(AF_INET, SOCK_STREAM, IPPROTO_TCP);
  if (ok && wr != INVALID_SOCKET) {
    int rc = ::connect(wr, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ok = rc == 0 || WSAGetLastError() == WSAEWOULDBLOCK;
    // The listener is non-blocking: wait (at most 5 s) for the connection.
    pollfd p{lis, POLLIN, 0};
    if (ok) ok = WSAPoll(&p, 1, 5000) == 1;
    if (ok) rd = ::accept(lis, nullptr, nullptr);
    ok = ok && rd != INVALID_SOCKET;
    u_long on = 1;
    if (ok) ok = ioctlsocket(rd, FIONBIO, &on) == 0;
    // Not inherited by child processes, like every socket of open_socket.
    if (ok) SetHandleInformation(reinterpret_cast<HANDLE>(rd), HANDLE_FLAG_INHERIT, 0);
    if (ok) {
      // The connect finished with the accept: both ends are usable. A wake
      // is one byte: send it at once.
      int one = 1;
      setsockopt(wr, IPPROTO_TCP, TCP_NODELAY, reinterpret_cast<const char*>(&one), sizeof one);
    }
  }
  closesocket(lis);
  if (!ok) {
    close_fd(rd);
    close_fd(wr);
    return;
  }
  rd_ = rd;
  wr_ = wr;
}

void WakePipe::signal() noexcept {
  char c = 1;
  ::send(wr_, &c, 1, 0);  // a full buffer (WSAEWOULDBLOCK) is readable already
}

void WakePipe::drain() noexcept {
  char buf[256];
  while (::recv(rd_, buf, sizeof buf, 0) > 0) {
  }
}

#else  // POSIX

bool net_init(std::string&) { return true; }

std::error_code last_error() {
  const int e = errno;  // before anything else can change it
  return std::error_code(e, std::generic_category());
}

bool would_block(const std::error_code& ec) {
  return ec.category() == std::generic_category() &&
         (ec.value() == EAGAIN || ec.value() == EWOULDBLOCK || ec.value() == EINTR);
}

namespace {
bool in_progress(const std::error_code& ec) { return ec.value() == EINPROGRESS; }
void set_error(int e) { errno = e; }
int timed_out_code() { return ETIMEDOUT; }

// nonblock_cloexec sets O_NONBLOCK and FD_CLOEXEC on fd, for systems whose
// socket() and pipe() cannot do it at once (macOS has neither
// SOCK_NONBLOCK nor pipe2).
[[maybe_unused]] bool nonblock_cloexec(int fd) {
  int fl = fcntl(fd, F_GETFL);
  int fdf = fcntl(fd, F_GETFD);
  return fl >= 0 && fdf >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0 && fcntl(fd, F_SETFD, fdf | FD_CLOEXEC) == 0;
}

[[maybe_unused]] void close_keep_errno(int fd) {
  int e = errno;
  ::close(fd);
  errno = e;
}

#ifdef MSG_NOSIGNAL
constexpr int kSendFlags = MSG_NOSIGNAL;
#else
constexpr int kSendFlags = 0;  // SO_NOSIGPIPE on the socket instead (open_socket)
#endif
}  // namespace

// TICKWHEEL_NO_SOCK_FLAGS takes the fcntl path where SOCK_NONBLOCK exists
// too: the tests build it so (tickwheel_portable), to run macOS's path here.
socket_t open_socket(int family, int type, int protocol) {
#if defined(SOCK_NONBLOCK) && defined(SOCK_CLOEXEC) && !defined(TICKWHEEL_NO_SOCK_FLAGS)
  int fd = ::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, protocol);
  if (fd < 0) return kNoSocket;
#else
  int fd = ::socket(family, type, protocol);
  if (fd < 0) return kNoSocket;
  if (!nonblock_cloexec(fd)) {
    close_keep_errno(fd);
    return kNoSocket;
  }
#endif
#if !defined(MSG_NOSIGNAL) && defined(SO_NOSIGPIPE)
  int one = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one) != 0) {
    close_keep_errno(fd);
    return kNoSocket;
  }
#elif !defined(MSG_NOSIGNAL)
#error "tickwheel: no MSG_NOSIGNAL and no SO_NOSIGPIPE: a write to a closed connection would raise SIGPIPE"
#endif
  return fd;
}

void close_fd(socket_t fd) noexcept {
  if (fd >= 0) ::close(fd);
}

ssize_t sock_send(socket_t fd, const void* buf, std::size_t n) { return ::send(fd, buf, n, kSendFlags); }
ssize_t sock_recv(socket_t fd, void* buf, std::size_t n) { return ::recv(fd, buf, n, 0); }

int poll_sockets(pollfd* fds, std::size_t n, int timeout_ms) {
  return ::poll(fds, static_cast<nfds_t>(n), timeout_ms);
}

WakePipe::WakePipe() {
  int fds[2];
#if defined(TICKWHEEL_HAVE_PIPE2)
  // pipe2 has no feature macro: CMake's check_symbol_exists defines
  // TICKWHEEL_HAVE_PIPE2 where it exists (Linux, the BSDs; not macOS).
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return;
#else
  if (::pipe(fds) != 0) return;
  if (!nonblock_cloexec(fds[0]) || !nonblock_cloexec(fds[1])) {
    ::close(fds[0]);
    ::close(fds[1]);
    return;
  }
#endif
  rd_ = fds[0];
  wr_ = fds[1];
}

void WakePipe::signal() noexcept {
  char c = 1;
  [[maybe_unused]] ssize_t n = ::write(wr_, &c, 1);  // a full pipe is readable already
}

void WakePipe::drain() noexcept {
  char buf[256];
  while (::read(rd_, buf, sizeof buf) > 0) {
  }
}

#endif

WakePipe::~WakePipe() {
  close_fd(rd_);
  close_fd(wr_);
}

namespace {

using Clock = std::chrono::steady_clock;

int ms_left(Clock::time_point deadline) {
  auto d = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return d < 0 ? 0 : static_cast<int>(d);
}

// wait_connected waits by the deadline for a non-blocking connect on fd to
// finish: true when it connected, else false with last_error() set.
bool wait_connected(socket_t fd, Clock::time_point deadline) {
#ifdef _WIN32
  // select, not WSAPoll: WSAPoll before Windows 10 2004 does not report a
  // refused connect; select reports it in the except set.
  fd_set wr, ex;
  FD_ZERO(&wr);
  FD_ZERO(&ex);
  FD_SET(fd, &wr);
  FD_SET(fd, &ex);
  const int ms = ms_left(deadline);
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  int rc = ::select(0, nullptr, &wr, &ex, &tv);
#else
  pollfd p{fd, POLLOUT, 0};
  int rc = poll_sockets(&p, 1, ms_left(deadline));
#endif
  if (rc < 0) return false;
  if (rc == 0) {
    set_error(timed_out_code());
    return false;
  }
  int soerr = 0;
  socklen_t len = sizeof soerr;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, reinterpret_cast<char*>(&soerr), &len) != 0) return false;
  if (soerr != 0) {
    set_error(soerr);
    return false;
  }
  return true;
}

// tcp_connect returns a non-blocking connected socket, or kNoSocket and err.
socket_t tcp_connect(const std::string& addr, Clock::time_point deadline, std::string& err) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos) {
    err = "address " + addr + " is not host:port";
    return kNoSocket;
  }
  std::string host = addr.substr(0, colon), port = addr.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (!net_init(err)) return kNoSocket;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    err = addr + ": " + gai_strerror(rc);
    return kNoSocket;
  }
  socket_t fd = kNoSocket;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    fd = open_socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd == kNoSocket) {
      const std::error_code ec = last_error();
      err = addr + ": socket: " + ec.message();
      continue;
    }
    bool ok = ::connect(fd, ai->ai_addr, static_cast<socklen_t>(ai->ai_addrlen)) == 0;
    if (!ok && in_progress(last_error())) ok = wait_connected(fd, deadline);
    if (ok) break;
    const std::error_code ec = last_error();
    err = addr + ": " + ec.message();
    close_fd(fd);
    fd = kNoSocket;
  }
  freeaddrinfo(res);
  if (fd != kNoSocket) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, reinterpret_cast<const char*>(&one), sizeof one);
  }
  return fd;
}

// kVerdictWait bounds the wait for a TLS 1.3 server's verdict on the client
// certificate (a session ticket or an alert) before the hello is written.
constexpr std::chrono::milliseconds kVerdictWait{1000};

// hello sends the hello on c and reads its reply, both by the deadline.
Result<Message> hello(Conn& c, const Options& o, Clock::time_point deadline) {
  Request r;
  r.op = Op::hello;
  r.id = 1;
  r.version = kProtocolVersion;
  r.name = o.name;
  r.token = o.token;
  std::vector<std::uint8_t> out;
  encode_request(r, out);
  std::size_t off = 0;
  FrameReader fr;
  std::vector<std::uint8_t> payload;
  auto fail = [&c](const std::string& why) {
    return Error{make_error_code(c.tls_error() ? errc::tls_failed : errc::connect_failed), why, ""};
  };
  // mTLS over TLS 1.3: wait (at most kVerdictWait) for the server to accept
  // the client certificate before writing (Conn::awaits_verdict).
  const auto verdict_by = std::min(deadline, Clock::now() + kVerdictWait);
  while (c.awaits_verdict() && Clock::now() < verdict_by) {
    pollfd p{c.fd(), c.read_events(), 0};
    if (!c.buffered() && poll_sockets(&p, 1, ms_left(verdict_by)) <= 0) break;
    std::uint8_t buf[4096];
    ssize_t got = c.read(buf, sizeof buf);
    if (got == 0) return fail("hello: connection closed");
    if (got == Conn::kError) return fail(c.error());
    if (got > 0) fr.feed(buf, static_cast<std::size_t>(got));  // a server that speaks first: kept
  }
  while (true) {
    const bool writing = off < out.size();
    if (writing || !c.buffered()) {  // bytes TLS holds decrypted are read without waiting
      pollfd p{c.fd(), writing ? c.write_events() : c.read_events(), 0};
      if (poll_sockets(&p, 1, ms_left(deadline)) <= 0) return fail("hello: no reply in time");
    }
    if (writing) {
      ssize_t w = c.write(out.data() + off, out.size() - off);
      if (w == Conn::kError) return fail(c.error());
      if (w > 0) off += static_cast<std::size_t>(w);
      continue;
    }
    std::uint8_t buf[4096];
    ssize_t got = c.read(buf, sizeof buf);
    if (got == 0) return fail("hello: connection closed");
    if (got == Conn::kError) return fail(c.error());
    if (got == Conn::kAgain) continue;
    fr.feed(buf, static_cast<std::size_t>(got));
    if (fr.next(payload)) return decode_message(payload.data(), payload.size());
    if (fr.bad()) return fail("hello: bad frame");
  }
}

// host_of is the host part of host:port, without IPv6 brackets.
std::string host_of(const std::string& addr) {
  auto colon = addr.rfind(':');
  std::string host = colon == std::string::npos ? addr : addr.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}

}  // namespace

std::vector<std::string> split_addresses(const std::vector<std::string>& in) {
  std::vector<std::string> out;
  for (const auto& s : in) {
    std::size_t start = 0;
    while (start <= s.size()) {
      auto comma = s.find(',', start);
      if (comma == std::string::npos) comma = s.size();
      std::string a = s.substr(start, comma - start);
      while (!a.empty() && a.front() == ' ') a.erase(a.begin());
      while (!a.empty() && a.back() == ' ') a.pop_back();
      if (!a.empty()) out.push_back(a);
      start = comma + 1;
    }
  }
  return out;
}

Result<Dialed> dial(const std::vector<std::string>& addrs, const std::string& first, const Options& o,
                    const TlsContext* tls) {
  std::vector<std::string> order;
  if (!first.empty()) order.push_back(first);
  order.insert(order.end(), addrs.begin(), addrs.end());
  if (order.empty()) return Error{make_error_code(errc::bad_argument), "no address to connect to", ""};
  std::string last = "no address answered";
  errc last_code = errc::connect_failed;
  for (const auto& start : order) {
    std::string addr = start;
    for (int hop = 0; hop <= o.max_redirects; hop++) {
      auto deadline = Clock::now() + o.connect_timeout;
      std::string err;
      Conn c(tcp_connect(addr, deadline, err));
      if (c.fd() == kNoSocket) {
        last = err;
        last_code = errc::connect_failed;
        break;
      }
      if (tls && !tls->handshake(c, addr, host_of(addr), deadline)) {
        last = c.error();
        last_code = c.tls_error() ? errc::tls_failed : errc::connect_failed;
        break;
      }
      auto m = hello(c, o, deadline);
      if (m && m.value().kind == Message::ok) {
        auto h = decode_hello(m.value());
        if (!h) return h.error();
        return Dialed{std::move(c), h.value(), addr};
      }
      if (!m) {
        // TLS's messages name the address already.
        last = m.code() == errc::tls_failed ? m.error().message : addr + ": " + m.error().message;
        last_code = static_cast<errc>(m.code().value());
        break;
      }
      const Error& e = m.value().err;
      if (e.code != errc::not_leader) return e;  // unauthorized, unsupported_version: the same everywhere
      last = addr + ": not_leader (" + e.message + ")";
      last_code = errc::connect_failed;
      if (e.leader.empty()) break;
      addr = e.leader;
    }
  }
  return Error{make_error_code(last_code), last, ""};
}

}  // namespace tickwheel::detail
