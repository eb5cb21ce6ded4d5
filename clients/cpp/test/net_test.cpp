// The platform helpers of src/net.cpp (sockets, the wake channel, SIGPIPE)
// and a round trip to the server through them. Built twice: into
// tickwheel_tests against the library as this system builds it (Linux:
// SOCK_NONBLOCK|SOCK_CLOEXEC, pipe2, MSG_NOSIGNAL), and into
// tickwheel_portable_tests against a build that takes the paths of POSIX
// systems without those (macOS: socket() + fcntl, pipe() + fcntl), so that
// those paths run here too.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <gtest/gtest.h>

#include "../src/net.hpp"
#include "testkit.hpp"

namespace {

using namespace tickwheel;

void expect_nonblock_cloexec(int fd) {
  int fl = fcntl(fd, F_GETFL);
  int fdf = fcntl(fd, F_GETFD);
  ASSERT_GE(fl, 0);
  ASSERT_GE(fdf, 0);
  EXPECT_TRUE(fl & O_NONBLOCK) << "fd " << fd << " blocks";
  EXPECT_TRUE(fdf & FD_CLOEXEC) << "fd " << fd << " is inherited by exec";
}

TEST(NetHelpers, SocketIsNonBlockingAndCloseOnExec) {
  detail::socket_t s = detail::open_socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_NE(s, detail::kNoSocket) << detail::last_error().message();
  expect_nonblock_cloexec(s);
  detail::close_fd(s);
}

TEST(NetHelpers, WakePipeWakesPollAndDrains) {
  detail::WakePipe w;
  ASSERT_TRUE(w.ok()) << detail::last_error().message();
  expect_nonblock_cloexec(w.read_end());
  pollfd p{w.read_end(), POLLIN, 0};
  EXPECT_EQ(detail::poll_sockets(&p, 1, 0), 0) << "readable before any signal";
  // More signals than a pipe holds: signal() must never block the caller.
  for (int i = 0; i < 200000; i++) w.signal();
  p.revents = 0;
  EXPECT_EQ(detail::poll_sockets(&p, 1, 1000), 1);
  EXPECT_TRUE(p.revents & POLLIN);
  w.drain();
  p.revents = 0;
  EXPECT_EQ(detail::poll_sockets(&p, 1, 0), 0) << "still readable after drain";
}

// A send to a connection the peer closed fails with an error and does not
// raise SIGPIPE (whose default action would end this test program).
TEST(NetHelpers, SendToClosedPeerIsAnErrorNotSigpipe) {
  int lis = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(lis, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t alen = sizeof a;
  ASSERT_EQ(::bind(lis, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(lis, 1), 0);
  ASSERT_EQ(getsockname(lis, reinterpret_cast<sockaddr*>(&a), &alen), 0);
  detail::socket_t s = detail::open_socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_NE(s, detail::kNoSocket);
  int rc = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ASSERT_TRUE(rc == 0 || errno == EINPROGRESS) << std::strerror(errno);
  int peer = ::accept(lis, nullptr, nullptr);
  ASSERT_GE(peer, 0);
  ::close(peer);
  ::close(lis);
  char buf[4096] = {};
  std::error_code ec;
  for (int i = 0; i < 1000 && !ec; i++) {
    pollfd p{s, POLLOUT, 0};
    detail::poll_sockets(&p, 1, 100);
    if (detail::sock_send(s, buf, sizeof buf) < 0 && !detail::would_block(detail::last_error())) {
      ec = detail::last_error();
    }
  }
  EXPECT_TRUE(ec == std::errc::broken_pipe || ec == std::errc::connection_reset) << ec.message();
  detail::close_fd(s);
}

TEST(NetHelpers, ClientRoundTrip) {
  auto srv = testkit::Server::start();
  ASSERT_TRUE(srv);
  auto c = testkit::connect(srv->addr());
  ASSERT_TRUE(c);
  auto b = c->bind(7).get();
  ASSERT_TRUE(b) << b.error().message;
  ASSERT_TRUE(c->add(7, 1, 5).get());
  ASSERT_TRUE(c->fast_forward(5).get());
  auto ev = testkit::take(*c, 1);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].tid, 1u);
  // A refused connection fails with the system's message, not a hang.
  srv->stop();
  auto refused = Client::connect(testkit::options(srv->addr()));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.code(), errc::connect_failed);
  EXPECT_NE(refused.error().message.find("refused"), std::string::npos) << refused.error().message;
}

}  // namespace
