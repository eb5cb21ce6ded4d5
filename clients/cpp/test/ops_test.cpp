// Every operation against the real server: results, errors, events through
// poll(), callbacks on the polling thread, and pipelined batches.
#include <gtest/gtest.h>

#include "testkit.hpp"

using namespace tickwheel;
using testkit::take;

class Ops : public ::testing::Test {
 protected:
  void SetUp() override {
    srv = testkit::Server::start();
    ASSERT_TRUE(srv);
    c = testkit::connect(srv->addr());
    ASSERT_TRUE(c);
  }
  std::unique_ptr<testkit::Server> srv;
  std::unique_ptr<Client> c;
};

TEST_F(Ops, HelloBindAddFireAndPoll) {
  EXPECT_EQ(c->hello_info().now, 1000u);
  EXPECT_EQ(c->hello_info().tick_ns, 10000000u);
  EXPECT_GT(c->hello_info().limits.at("max_frame"), 0u);
  auto b = c->bind(42).get();
  ASSERT_TRUE(b) << b.error().message;
  AddOptions o;
  o.repeat = 3;
  o.data = {'h', 'i'};
  auto due = c->add(42, 7, 30, o).get();
  ASSERT_TRUE(due);
  EXPECT_EQ(due.value(), 1030u);
  auto ff = c->fast_forward(90).get();
  ASSERT_TRUE(ff);
  EXPECT_EQ(ff.value().now, 1090u);
  EXPECT_EQ(ff.value().fired, 3u);
  auto ev = take(*c, 3);
  ASSERT_EQ(ev.size(), 3u);
  for (std::uint64_t i = 0; i < 3; i++) {
    EXPECT_EQ(ev[i].receiver, 42u);
    EXPECT_EQ(ev[i].tid, 7u);
    EXPECT_EQ(ev[i].tick, 1030 + 30 * i);
    EXPECT_EQ(ev[i].fired, i + 1);
    EXPECT_EQ(ev[i].repeat, 3u);
    EXPECT_EQ(ev[i].last, i == 2);
    EXPECT_EQ(ev[i].data, (std::vector<std::uint8_t>{'h', 'i'}));
    EXPECT_EQ(ev[i].seq, b.value().first_seq + i);
  }
}

TEST_F(Ops, GetListPauseResumeCancel) {
  AddOptions o;
  o.repeat = kForever;
  o.every = 50;
  for (std::uint64_t tid = 1; tid <= 5; tid++) ASSERT_TRUE(c->add(9, tid, 10 * tid, o).get());
  auto t = c->get(9, 3).get();
  ASSERT_TRUE(t);
  EXPECT_EQ(t.value().due, 1030u);
  EXPECT_EQ(t.value().remaining, 30u);
  EXPECT_EQ(t.value().every, 50u);
  EXPECT_EQ(t.value().repeat, kForever);
  EXPECT_FALSE(t.value().paused);

  ASSERT_TRUE(c->pause(9, 3).get());
  EXPECT_TRUE(c->get(9, 3).get().value().paused);
  EXPECT_EQ(c->pause(9, 3).get().code(), errc::bad_state);
  ASSERT_TRUE(c->fast_forward(100).get());
  ASSERT_TRUE(c->resume(9, 3).get());
  EXPECT_EQ(c->get(9, 3).get().value().due, 1130u);  // the 30 ticks it had left
  EXPECT_EQ(c->resume(9, 3).get().code(), errc::bad_state);

  auto page = c->list_page(9, 2, 2).get();
  ASSERT_TRUE(page);
  ASSERT_EQ(page.value().timers.size(), 2u);
  EXPECT_EQ(page.value().timers[0].tid, 2u);
  EXPECT_EQ(page.value().next, 4u);
  auto all = c->list(9).get();
  ASSERT_TRUE(all);
  ASSERT_EQ(all.value().size(), 5u);
  for (std::uint64_t i = 0; i < 5; i++) EXPECT_EQ(all.value()[i].tid, i + 1);

  ASSERT_TRUE(c->cancel(9, 1).get());
  EXPECT_EQ(c->cancel(9, 1).get().code(), errc::not_found);
  EXPECT_EQ(c->get(9, 1).get().code(), errc::not_found);
  auto n = c->cancel_all(9).get();
  ASSERT_TRUE(n);
  EXPECT_EQ(n.value(), 4u);
  EXPECT_TRUE(c->list(9).get().value().empty());
}

TEST_F(Ops, ErrorsCarryCodeAndMessage) {
  ASSERT_TRUE(c->add(1, 1, 10).get());
  auto dup = c->add(1, 1, 10).get();
  EXPECT_EQ(dup.code(), errc::exists);
  EXPECT_FALSE(dup.error().message.empty());
  AddOptions rep;
  rep.replace = true;
  EXPECT_TRUE(c->add(1, 1, 20, rep).get());
  EXPECT_EQ(c->unbind(77).get().code(), errc::not_found);
  EXPECT_EQ(c->set_speed(0).get().code(), errc::invalid_argument);
  EXPECT_EQ(c->add_schedule(1, 2, "0 25 * * *").get().code(), errc::invalid_argument);
  EXPECT_EQ(c->ack(1, 5).get().code(), errc::not_found);
  // A session without the admin token has no admin rights.
  auto plain = testkit::connect(srv->addr(), false);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->fast_forward(1).get().code(), errc::unauthorized);
  EXPECT_EQ(plain->stats().get().code(), errc::unauthorized);
  EXPECT_TRUE(plain->ping().get());
  // A wrong token fails connect itself.
  auto o = testkit::options(srv->addr());
  o.token = "not-the-token-at-all";
  auto bad = Client::connect(o);
  EXPECT_EQ(bad.code(), errc::unauthorized);
}

TEST_F(Ops, AdminClock) {
  EXPECT_EQ(c->ping().get().value(), 1000u);
  EXPECT_EQ(c->fast_forward(5).get().value().now, 1005u);
  ASSERT_TRUE(c->set_speed(2.5).get());
  ASSERT_TRUE(c->freeze().get());
  auto s = c->stats().get();
  ASSERT_TRUE(s);
  EXPECT_EQ(s.value().get("now"), 1005u);
  EXPECT_TRUE(s.value().bools.at("frozen"));
  EXPECT_DOUBLE_EQ(s.value().floats.at("speed"), 2.5);
  EXPECT_EQ(s.value().get("sessions"), 1u);
  auto r = c->resume_sync().get();
  ASSERT_TRUE(r);
  EXPECT_GE(r.value(), 1005u);
  EXPECT_FALSE(c->stats().get().value().bools.at("frozen"));
  EXPECT_EQ(c->cluster("status").get().code(), errc::bad_state);  // a single server
}

TEST_F(Ops, AddAtAfterAndSchedules) {
  EXPECT_EQ(c->add_at(3, 1, 1500).get().value(), 1500u);
  EXPECT_EQ(c->add_at(3, 2, 10).get().value(), 1001u);  // a past tick fires at the next
  EXPECT_EQ(c->add(3, 3, 0).get().value(), 1001u);
  // 25 ms at 10 ms ticks, counted from where tw-time stands in its tick: 3 ticks at most.
  auto d = c->add_after(3, 4, std::chrono::milliseconds(25)).get();
  ASSERT_TRUE(d);
  EXPECT_GE(d.value(), 1003u);
  EXPECT_LE(d.value(), 1004u);
  AddOptions o;
  o.repeat = kForever;
  o.zone = "Europe/Paris";
  o.missed = Missed::once;
  ASSERT_TRUE(c->add_schedule(3, 5, "0 4 * * *", o).get());
  auto t = c->get(3, 5).get();
  ASSERT_TRUE(t);
  EXPECT_EQ(t.value().schedule, "0 4 * * *");
  EXPECT_EQ(t.value().zone, "Europe/Paris");
  EXPECT_EQ(t.value().missed, Missed::once);
  EXPECT_EQ(t.value().every, 0u);
  AddOptions e;
  e.repeat = kForever;
  ASSERT_TRUE(c->add_schedule(3, 6, "@every 90s", e).get());
  EXPECT_EQ(c->get(3, 6).get().value().every, 9000u);
}

TEST_F(Ops, CallbacksRunOnThePollingThread) {
  std::thread::id ran_on;
  std::uint64_t due = 0;
  auto f = c->add(5, 1, 40, {}, [&](const Result<std::uint64_t>& r) {
    ran_on = std::this_thread::get_id();
    due = r.value();
  });
  ASSERT_TRUE(f.get());  // the future completes on the I/O thread; the callback waits for poll
  EXPECT_EQ(due, 0u);
  for (int i = 0; i < 100 && due == 0; i++) {
    c->wait_event(std::chrono::milliseconds(20));
    c->poll(nullptr);
  }
  EXPECT_EQ(due, 1040u);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST_F(Ops, BatchPipelinesThousandsOfAdds) {
  std::vector<Future<std::uint64_t>> fs;
  c->begin_batch();
  for (std::uint64_t tid = 1; tid <= 5000; tid++) fs.push_back(c->add(8, tid, tid));
  c->end_batch();
  for (std::uint64_t i = 0; i < fs.size(); i++) {
    auto r = fs[i].get();
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r.value(), 1001 + i);
  }
  auto all = c->list(8).get();  // 5000 timers: several pages of max_list_page
  ASSERT_TRUE(all);
  EXPECT_EQ(all.value().size(), 5000u);
}

TEST_F(Ops, TakeoverMovesEventsToTheNewSession) {
  ASSERT_TRUE(c->bind(4).get());
  auto other = testkit::connect(srv->addr());
  ASSERT_TRUE(other);
  ASSERT_TRUE(other->bind(4).get());
  auto t = take(*c, 1, 3000, EventKind::takeover);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].receiver, 4u);
  EXPECT_EQ(t[0].session, other->hello_info().session);
  ASSERT_TRUE(c->add(4, 1, 1).get());
  ASSERT_TRUE(c->fast_forward(1).get());
  EXPECT_EQ(take(*other, 1).size(), 1u);
  EXPECT_EQ(take(*c, 1, 300).size(), 0u);
}

TEST(Tour, RunsAgainstTheServer) {
  const char* tour = std::getenv("TICKWHEEL_TOUR");
  if (!tour) GTEST_SKIP() << "run by ctest's tour test";
  auto srv = testkit::Server::start();
  ASSERT_TRUE(srv);
  std::string cmd = std::string(tour) + " " + srv->addr() + " " + testkit::kAdminToken;
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

// The tour's TLS arguments, against a server with mTLS.
TEST(Tour, RunsAgainstTheServerWithMutualTls) {
  const char* tour = std::getenv("TICKWHEEL_TOUR");
  if (!tour) GTEST_SKIP() << "run by ctest's tour test";
  if (!Client::tls_available()) GTEST_SKIP() << "built with TICKWHEEL_TLS=OFF";
  const std::string certs = testkit::make_certs();
  ASSERT_FALSE(certs.empty());
  auto srv = testkit::Server::start({"-frozen", "-start-tick", "1000", "-tls-cert", certs + "/server.pem", "-tls-key",
                                     certs + "/server.key", "-tls-client-ca", certs + "/ca.pem"});
  ASSERT_TRUE(srv);
  std::string cmd = std::string(tour) + " " + srv->addr() + " " + testkit::kAdminToken + " " + certs + "/ca.pem " +
                    certs + "/client.pem " + certs + "/client.key";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  [[maybe_unused]] int rc = std::system(("rm -rf '" + certs.substr(0, certs.rfind('/')) + "'").c_str());
}
