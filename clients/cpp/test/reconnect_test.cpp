// Reconnect with re-bind, not_leader following over an address list, call
// deadlines, and backpressure from a slow poller.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "testkit.hpp"

using namespace tickwheel;
using testkit::take;

TEST(Reconnect, RebindsAfterADroppedConnection) {
  auto srv = testkit::Server::start();
  ASSERT_TRUE(srv);
  testkit::Relay relay(srv->addr());
  auto c = testkit::connect(relay.addr());
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->bind(11).get());
  const auto session = c->hello_info().session;
  ASSERT_EQ(relay.cut(), 1);
  std::vector<Event> others;
  ASSERT_EQ(take(*c, 1, 5000, EventKind::reconnected, &others).size(), 1u);
  ASSERT_FALSE(others.empty());
  EXPECT_EQ(others[0].kind, EventKind::disconnected);
  EXPECT_EQ(c->reconnects(), 1u);
  EXPECT_NE(c->hello_info().session, session);
  // The receiver was bound again: its events come to the new session.
  auto admin = testkit::connect(srv->addr());
  ASSERT_TRUE(admin);
  ASSERT_TRUE(admin->add(11, 1, 1).get());
  ASSERT_TRUE(c->ping().get());  // the re-bind's reply came before this one
  ASSERT_TRUE(admin->fast_forward(1).get());
  auto ev = take(*c, 1);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].tid, 1u);
}

TEST(Reconnect, CallsMadeWhileDisconnectedWaitForTheConnection) {
  auto srv = testkit::Server::start();
  ASSERT_TRUE(srv);
  const std::string addr = srv->addr();
  auto c = testkit::connect(addr);
  ASSERT_TRUE(c);
  srv->stop();
  ASSERT_EQ(take(*c, 1, 3000, EventKind::disconnected).size(), 1u);
  auto f = c->ping();  // queued until the server is back
  EXPECT_EQ(f.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  srv = testkit::Server::start({"-frozen", "-start-tick", "1000"}, "", addr);
  ASSERT_TRUE(srv);
  auto r = f.get();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r.value(), 1000u);
}

namespace {
// Follower is a listener that answers every connection's first frame with
// not_leader naming leader, as a cluster follower does (PROTOCOL.md "Clusters").
class Follower {
 public:
  explicit Follower(std::string leader) : leader_(std::move(leader)) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    listen(fd_, 4);
    socklen_t len = sizeof sa;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len);
    addr_ = "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
    th_ = std::thread([this] {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[1024];
      [[maybe_unused]] ssize_t n = read(c, buf, sizeof buf);
      // [1, 1, 14, "follower", leader]
      std::string body = "\x95\x01\x01\x0e\xa8" "follower";
      body += static_cast<char>(0xa0 | leader_.size());
      body += leader_;
      std::string frame = {0, 0, 0, static_cast<char>(body.size())};
      frame += body;
      [[maybe_unused]] ssize_t w = write(c, frame.data(), frame.size());
      close(c);
      served = true;
    });
  }
  ~Follower() {
    shutdown(fd_, SHUT_RDWR);
    th_.join();
    close(fd_);
  }
  const std::string& addr() const { return addr_; }
  std::atomic<bool> served{false};

 private:
  std::string leader_, addr_;
  int fd_;
  std::thread th_;
};
}  // namespace

TEST(Reconnect, FollowsNotLeaderOverTheAddressList) {
  auto srv = testkit::Server::start();
  ASSERT_TRUE(srv);
  Follower f(srv->addr());
  // The first address refuses connections; the second is a follower naming the leader.
  auto o = testkit::options("127.0.0.1:1," + f.addr());
  auto c = Client::connect(o);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_TRUE(f.served);
  EXPECT_EQ(c.value()->address(), srv->addr());
  EXPECT_TRUE(c.value()->ping().get());
}

TEST(Reconnect, NoNodeReachableFailsConnect) {
  auto o = testkit::options("127.0.0.1:1");
  o.connect_timeout = std::chrono::milliseconds(500);
  auto c = Client::connect(o);
  EXPECT_EQ(c.code(), errc::connect_failed);
}

TEST(Reconnect, RequestTimeout) {
  auto srv = testkit::Server::start();
  ASSERT_TRUE(srv);
  auto o = testkit::options(srv->addr());
  o.request_timeout = std::chrono::milliseconds(200);
  o.event_buffer = 1;  // a full poll queue stops reading: replies wait too
  auto c = Client::connect(o);
  ASSERT_TRUE(c);
  auto& cl = *c.value();
  ASSERT_TRUE(cl.bind(6).get());
  ASSERT_TRUE(cl.add(6, 1, 1).get());
  ASSERT_TRUE(cl.add(6, 2, 1).get());
  ASSERT_TRUE(cl.fast_forward(1).get());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto r = cl.ping().get();  // nobody polls: the reply is not read in time
  EXPECT_EQ(r.code(), errc::request_timeout);
  EXPECT_EQ(take(cl, 2).size(), 2u);  // polling frees the queue; reading goes on
  EXPECT_TRUE(cl.ping().get());
}

TEST(Reconnect, SlowPollerLosesNothing) {
  auto srv = testkit::Server::start();
  ASSERT_TRUE(srv);
  auto o = testkit::options(srv->addr());
  o.event_buffer = 16;
  auto c = Client::connect(o);
  ASSERT_TRUE(c);
  auto& cl = *c.value();
  ASSERT_TRUE(cl.bind(7).get());
  AddOptions ao;
  ao.repeat = 500;
  ao.every = 1;
  ASSERT_TRUE(cl.add(7, 1, 1, ao).get());
  auto ff = cl.fast_forward(500);  // its reply comes after the events: poll to get it
  std::vector<Event> ev;
  while (ev.size() < 500) {
    auto got = take(cl, 10, 5000);
    if (got.empty()) break;
    ev.insert(ev.end(), got.begin(), got.end());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a slow game frame
  }
  ASSERT_EQ(ev.size(), 500u);
  for (std::size_t i = 0; i < ev.size(); i++) EXPECT_EQ(ev[i].fired, i + 1);
  EXPECT_EQ(ff.get().value().fired, 500u);
  EXPECT_EQ(cl.dropped(), 0u);
}

// A change whose reply was lost with the connection is sent again on the
// next one with the same request id: the server, which had applied it,
// answers with its first reply and applies nothing twice.
TEST(Reconnect, ChangesAreSentAgainWithTheirRequestId) {
  auto srv = testkit::Server::start({"-frozen", "-start-tick", "1000", "-max-request-ids", "100000"});
  ASSERT_TRUE(srv);
  testkit::Relay relay(srv->addr());
  auto c = testkit::connect(relay.addr());
  ASSERT_TRUE(c);
  ASSERT_GT(c->hello_info().limits.count("request_id_ticks"), 0u);
  auto admin = testkit::connect(srv->addr());
  ASSERT_TRUE(admin);
  for (std::uint64_t tid = 1; tid <= 3; tid++) ASSERT_TRUE(admin->add(43, tid, 50).get());

  relay.deafen();  // the server applies what follows; its replies are lost
  auto add = c->add(42, 7, 30);            // without replace: a second apply would be `exists`
  auto cancelled = c->cancel_all(43);      // a second apply would count 0
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((!admin->get(42, 7).get() || admin->list(43).get().value().size() != 0) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(admin->get(42, 7).get()) << "the add was not applied";
  EXPECT_EQ(add.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  ASSERT_EQ(relay.cut(), 1);

  auto due = add.get();
  ASSERT_TRUE(due) << due.error().message;
  EXPECT_EQ(due.value(), 1030u);  // the first reply again
  auto n = cancelled.get();
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(n.value(), 3u);
  EXPECT_EQ(c->reconnects(), 1u);
  auto all = admin->list(42).get();
  ASSERT_TRUE(all);
  EXPECT_EQ(all.value().size(), 1u);
  // A change made after the reconnect is applied as usual.
  EXPECT_EQ(c->add(42, 7, 30).get().code(), errc::exists);
}

// The bulk ops carry a request id too: pause_all, resume_group and
// cancel_group whose replies were lost are sent again, and the server
// answers each with its first count (a second apply would count 0).
TEST(Reconnect, BulkOpsAreSentAgainWithTheirRequestId) {
  // The server remembers request ids, as a cluster node does by default.
  auto srv = testkit::Server::start({"-frozen", "-start-tick", "1000", "-max-request-ids", "100000"});
  ASSERT_TRUE(srv);
  testkit::Relay relay(srv->addr());
  auto c = testkit::connect(relay.addr());
  ASSERT_TRUE(c);
  auto admin = testkit::connect(srv->addr());
  ASSERT_TRUE(admin);
  AddOptions g;
  g.group = 9;
  for (std::uint64_t tid = 1; tid <= 3; tid++) ASSERT_TRUE(admin->add(44, tid, 50, g).get());

  relay.deafen();  // the server applies what follows, in order; its replies are lost
  auto paused = c->pause_all(44);
  auto resumed = c->resume_group(9);
  auto cancelled = c->cancel_group(9);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (admin->list(44).get().value().size() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(admin->list(44).get().value().size(), 0u) << "the bulk ops were not applied";
  ASSERT_EQ(relay.cut(), 1);

  for (auto* f : {&paused, &resumed, &cancelled}) {
    auto n = f->get();
    ASSERT_TRUE(n) << n.error().message;
    EXPECT_EQ(n.value(), 3u) << "the first reply's count";
  }
  EXPECT_EQ(c->reconnects(), 1u);
}

namespace {
// SteppingDown passes one connection's hello through to the leader (so the
// client sees the leader's limits), then answers the next request with
// not_leader naming the leader and closes, as a leader that lost its
// leadership does: that request is never applied.
class SteppingDown {
 public:
  explicit SteppingDown(std::string leader) : leader_(std::move(leader)) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    listen(fd_, 4);
    socklen_t len = sizeof sa;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len);
    addr_ = "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
    th_ = std::thread([this] { serve(); });
  }
  ~SteppingDown() {
    shutdown(fd_, SHUT_RDWR);
    th_.join();
    close(fd_);
  }
  const std::string& addr() const { return addr_; }
  std::atomic<int> refused_id{-1};

 private:
  // frame reads one whole frame (header included) from fd into out.
  static bool frame(int fd, std::string& out) {
    out.assign(4, '\0');
    for (std::size_t got = 0; got < 4;) {
      ssize_t n = read(fd, &out[got], 4 - got);
      if (n <= 0) return false;
      got += static_cast<std::size_t>(n);
    }
    std::size_t len = (std::size_t(std::uint8_t(out[0])) << 24) | (std::size_t(std::uint8_t(out[1])) << 16) |
                      (std::size_t(std::uint8_t(out[2])) << 8) | std::uint8_t(out[3]);
    out.resize(4 + len);
    for (std::size_t got = 0; got < len;) {
      ssize_t n = read(fd, &out[4 + got], len - got);
      if (n <= 0) return false;
      got += static_cast<std::size_t>(n);
    }
    return true;
  }
  void serve() {
    int c = accept(fd_, nullptr, nullptr);
    if (c < 0) return;
    int up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(std::stoi(leader_.substr(leader_.rfind(':') + 1))));
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    std::string f;
    if (::connect(up, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 && frame(c, f) &&
        write(up, f.data(), f.size()) == static_cast<ssize_t>(f.size()) && frame(up, f) &&
        write(c, f.data(), f.size()) == static_cast<ssize_t>(f.size()) && frame(c, f) && f.size() > 8) {
      // [op, id, ...]: an add with a client has 16 elements (array 16: 0xdc and 2 bytes).
      const std::size_t idx = std::uint8_t(f[4]) == 0xdc ? 8 : 6;
      // [1, id, 14, "stepped down", leader] (ids here are fixints: under 128)
      std::string body = "\x95\x01";
      body += f[idx];
      body += "\x0e\xac" "stepped down";
      body += static_cast<char>(0xa0 | leader_.size());
      body += leader_;
      std::string out = {0, 0, 0, static_cast<char>(body.size())};
      out += body;
      [[maybe_unused]] ssize_t w = write(c, out.data(), out.size());
      refused_id = std::uint8_t(f[idx]);
    }
    close(up);
    close(c);
  }
  std::string leader_, addr_;
  int fd_;
  std::thread th_;
};
}  // namespace

// A change answered not_leader is sent again, with its request id, to the
// leader the reply named, and the caller sees that one reply.
TEST(Reconnect, ChangeAnsweredNotLeaderGoesToTheLeader) {
  // The server remembers request ids, as a cluster node does by default.
  auto srv = testkit::Server::start({"-frozen", "-start-tick", "1000", "-max-request-ids", "100000"});
  ASSERT_TRUE(srv);
  SteppingDown node(srv->addr());
  auto c = testkit::connect(node.addr());
  ASSERT_TRUE(c);
  auto due = c->add(42, 7, 30).get();
  EXPECT_EQ(node.refused_id, 2);  // the add, refused by the node that stepped down
  ASSERT_TRUE(due) << due.error().message;
  EXPECT_EQ(due.value(), 1030u);
  EXPECT_EQ(c->address(), srv->addr());
  EXPECT_TRUE(c->get(42, 7).get());
}
