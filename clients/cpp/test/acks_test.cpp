// Acknowledged mode against the real server: every event at least once
// across a dropped connection and a server restart, duplicates removed
// within one Client, acks (manual and automatic) ending redelivery.
#include <stdlib.h>

#include <gtest/gtest.h>

#include "testkit.hpp"

using namespace tickwheel;
using testkit::take;

namespace {
std::vector<std::uint64_t> seqs(const std::vector<Event>& ev) {
  std::vector<std::uint64_t> s;
  for (auto& e : ev) s.push_back(e.seq);
  return s;
}
}  // namespace

TEST(Acks, DroppedConnectionRedeliversUnackedOnce) {
  auto srv = testkit::Server::start();
  ASSERT_TRUE(srv);
  testkit::Relay relay(srv->addr());
  auto c = testkit::connect(relay.addr());
  ASSERT_TRUE(c);
  BindOptions bo;
  bo.ack = true;
  bo.ack_mode = AckMode::manual;
  auto b = c->bind(1, bo).get();
  ASSERT_TRUE(b);
  const std::uint64_t s0 = b.value().first_seq;
  for (std::uint64_t tid = 1; tid <= 3; tid++) ASSERT_TRUE(c->add(1, tid, tid).get());
  ASSERT_TRUE(c->fast_forward(3).get());
  auto ev = take(*c, 3);
  ASSERT_EQ(seqs(ev), (std::vector<std::uint64_t>{s0, s0 + 1, s0 + 2}));
  ASSERT_TRUE(c->ack(1, s0).get());  // the first is done; two are not

  ASSERT_EQ(relay.cut(), 1);
  std::vector<Event> others;
  auto again = take(*c, 1, 5000, EventKind::reconnected, &others);
  ASSERT_EQ(again.size(), 1u) << "no reconnect";
  // The server delivers s0+1 and s0+2 again after the re-bind; this Client had
  // delivered them, so it removes them: the user sees each event once.
  ASSERT_TRUE(c->add(1, 4, 1).get());
  ASSERT_TRUE(c->fast_forward(1).get());
  auto after = take(*c, 1);
  ASSERT_EQ(seqs(after), (std::vector<std::uint64_t>{s0 + 3}));
  EXPECT_EQ(c->redelivered(), 2u);
  EXPECT_EQ(c->dropped(), 0u);

  // Another client binding the receiver gets every unacknowledged event again.
  ASSERT_TRUE(c->unbind(1).get());
  auto other = testkit::connect(srv->addr());
  ASSERT_TRUE(other);
  auto ob = other->bind(1, bo).get();
  ASSERT_TRUE(ob);
  EXPECT_EQ(ob.value().first_seq, s0 + 1);
  EXPECT_EQ(seqs(take(*other, 3)), (std::vector<std::uint64_t>{s0 + 1, s0 + 2, s0 + 3}));
}

TEST(Acks, ServerRestartRedeliversUnacked) {
  char dir[] = "/tmp/tickwheel-cpp-acks-XXXXXX";
  ASSERT_TRUE(mkdtemp(dir));
  std::vector<std::string> args = {"-frozen", "-start-tick", "1000", "-fsync", "always"};
  auto srv = testkit::Server::start(args, dir);
  ASSERT_TRUE(srv);
  const std::string addr = srv->addr();
  auto c = testkit::connect(addr);
  ASSERT_TRUE(c);
  BindOptions bo;
  bo.ack = true;
  bo.ack_mode = AckMode::manual;
  auto b = c->bind(2, bo).get();
  ASSERT_TRUE(b);
  const std::uint64_t s0 = b.value().first_seq;
  for (std::uint64_t tid = 1; tid <= 3; tid++) ASSERT_TRUE(c->add(2, tid, tid).get());
  ASSERT_TRUE(c->fast_forward(3).get());
  ASSERT_EQ(take(*c, 3).size(), 3u);
  ASSERT_TRUE(c->ack(2, s0).get());

  srv->stop(true);  // kill -9: with fsync always nothing acknowledged is lost
  srv = testkit::Server::start(args, dir, addr);
  ASSERT_TRUE(srv);
  auto again = take(*c, 1, 10000, EventKind::reconnected);
  ASSERT_EQ(again.size(), 1u) << "no reconnect";
  ASSERT_TRUE(c->add(2, 4, 1).get());
  ASSERT_TRUE(c->fast_forward(1).get());
  EXPECT_EQ(seqs(take(*c, 1)), (std::vector<std::uint64_t>{s0 + 3}));
  EXPECT_EQ(c->redelivered(), 2u);

  // A new process after the restart (no memory of what was delivered) gets them all.
  c.reset();
  auto fresh = testkit::connect(addr);
  ASSERT_TRUE(fresh);
  auto fb = fresh->bind(2, bo).get();
  ASSERT_TRUE(fb);
  EXPECT_EQ(fb.value().first_seq, s0 + 1);
  auto ev = take(*fresh, 3);
  EXPECT_EQ(seqs(ev), (std::vector<std::uint64_t>{s0 + 1, s0 + 2, s0 + 3}));
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].tid, 2u);
  srv.reset();
  std::string rm = std::string("rm -rf ") + dir;
  EXPECT_EQ(std::system(rm.c_str()), 0);
}

TEST(Acks, AutomaticAcksAfterPoll) {
  auto srv = testkit::Server::start();
  ASSERT_TRUE(srv);
  testkit::Relay relay(srv->addr());
  auto c = testkit::connect(relay.addr());
  ASSERT_TRUE(c);
  BindOptions bo;
  bo.ack = true;  // automatic by default
  ASSERT_TRUE(c->bind(3, bo).get());
  for (std::uint64_t tid = 1; tid <= 4; tid++) ASSERT_TRUE(c->add(3, tid, 1).get());
  ASSERT_TRUE(c->fast_forward(1).get());
  ASSERT_EQ(take(*c, 4).size(), 4u);
  // poll sent one ack for the four; once the server has it, nothing is pending.
  for (int i = 0; i < 100; i++) {
    if (c->stats().get().value().get("outbox_events") == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(c->stats().get().value().get("outbox_events"), 0u);
  relay.cut();
  ASSERT_EQ(take(*c, 1, 5000, EventKind::reconnected).size(), 1u);
  ASSERT_TRUE(c->ping().get());
  EXPECT_EQ(c->redelivered(), 0u);  // acked events are not delivered again
}

// An automatic ack that dies with the connection is sent again: without it the
// events it covered would stay in the server's outbox until some later event's
// ack. The server redelivers them at the re-bind, and the client removes them
// as duplicates, unless the ack sent again reached the server first (seen once
// under ASan in CI: none redelivered, the outbox empty all the same).
TEST(Acks, AutomaticAckLostWithTheConnectionIsSentAgain) {
  auto srv = testkit::Server::start();
  ASSERT_TRUE(srv);
  testkit::Relay relay(srv->addr());
  auto c = testkit::connect(relay.addr());
  ASSERT_TRUE(c);
  auto admin = testkit::connect(srv->addr());
  ASSERT_TRUE(admin);
  BindOptions bo;
  bo.ack = true;
  ASSERT_TRUE(c->bind(4, bo).get());
  for (std::uint64_t tid = 1; tid <= 2; tid++) ASSERT_TRUE(c->add(4, tid, 1).get());
  ASSERT_TRUE(c->fast_forward(1).get());
  relay.blackhole();  // the ack poll sends next never reaches the server
  ASSERT_EQ(take(*c, 2).size(), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(admin->stats().get().value().get("outbox_events"), 2u);
  relay.cut();
  ASSERT_EQ(take(*c, 1, 5000, EventKind::reconnected).size(), 1u);
  std::size_t again = 0;  // fire events handed to the game after the reconnect
  for (int i = 0; i < 200 && admin->stats().get().value().get("outbox_events") != 0; i++) {
    c->poll([&](const Event& e) { again += e.kind == EventKind::fire; });  // the game loop goes on polling
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  c->poll([&](const Event& e) { again += e.kind == EventKind::fire; });
  EXPECT_EQ(admin->stats().get().value().get("outbox_events"), 0u);
  EXPECT_EQ(again, 0u);  // whatever came again was removed as a duplicate
  EXPECT_TRUE(c->redelivered() == 0u || c->redelivered() == 2u) << c->redelivered();
}
