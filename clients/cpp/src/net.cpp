#include "net.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tickwheel::detail {
namespace {

using Clock = std::chrono::steady_clock;

int ms_left(Clock::time_point deadline) {
  auto d = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return d < 0 ? 0 : static_cast<int>(d);
}

// tcp_connect returns a non-blocking connected socket, or -1 and err.
int tcp_connect(const std::string& addr, Clock::time_point deadline, std::string& err) {
  auto colon = addr.rfind(':');
  if (colon == std::string::npos) {
    err = "address " + addr + " is not host:port";
    return -1;
  }
  std::string host = addr.substr(0, colon), port = addr.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    err = addr + ": " + gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, ms_left(deadline)) == 1 ? 0 : -1;
      int soerr = 0;
      socklen_t len = sizeof soerr;
      if (rc == 0 && (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0 || soerr != 0)) {
        errno = soerr;
        rc = -1;
      } else if (rc != 0) {
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) break;
    err = addr + ": " + std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd >= 0) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
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
    if (!c.buffered() && ::poll(&p, 1, ms_left(verdict_by)) <= 0) break;
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
      if (::poll(&p, 1, ms_left(deadline)) <= 0) return fail("hello: no reply in time");
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

void close_fd(int fd) noexcept {
  if (fd >= 0) ::close(fd);
}

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
      if (c.fd() < 0) {
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
