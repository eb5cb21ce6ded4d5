// Groups and bulk operations against the real server: add's group, the
// 13th timer element, pause_all/resume_all of a receiver or a group,
// cancel_group, and list_group paged across receivers.
#include <gtest/gtest.h>

#include "testkit.hpp"

using namespace tickwheel;
using testkit::take;

class Groups : public ::testing::Test {
 protected:
  void SetUp() override {
    srv = testkit::Server::start();
    ASSERT_TRUE(srv);
    c = testkit::connect(srv->addr());
    ASSERT_TRUE(c);
  }
  // add_in adds (receiver, tid) in group, firing after `after` ticks.
  void add_in(std::uint64_t receiver, std::uint64_t tid, std::uint64_t group, std::uint64_t after) {
    AddOptions o;
    o.group = group;
    auto r = c->add(receiver, tid, after, o).get();
    ASSERT_TRUE(r) << r.error().message;
  }
  std::unique_ptr<testkit::Server> srv;
  std::unique_ptr<Client> c;
};

TEST_F(Groups, AddInAGroupAndListTheGroupPageByPage) {
  // Group 77 spans receivers 5 and 3; receiver 3 also has a timer in no group.
  add_in(5, 1, 77, 10);
  add_in(3, 2, 77, 20);
  add_in(3, 1, 77, 30);
  add_in(3, 9, 0, 40);
  add_in(4, 1, 78, 40);
  auto t = c->get(3, 2).get();
  ASSERT_TRUE(t);
  EXPECT_EQ(t.value().group, 77u);
  EXPECT_EQ(t.value().due, 1020u);
  EXPECT_EQ(c->get(3, 9).get().value().group, 0u);
  auto l = c->list(3).get();
  ASSERT_TRUE(l);
  ASSERT_EQ(l.value().size(), 3u);
  EXPECT_EQ(l.value()[0].group, 77u);
  EXPECT_EQ(l.value()[2].group, 0u);

  // Pages of two in (receiver, tid) order: (3,1) (3,2) | (5,1).
  auto p1 = c->list_group_page(77, {}, 2).get();
  ASSERT_TRUE(p1) << p1.error().message;
  ASSERT_EQ(p1.value().timers.size(), 2u);
  EXPECT_EQ(p1.value().timers[0].receiver, 3u);
  EXPECT_EQ(p1.value().timers[0].tid, 1u);
  EXPECT_EQ(p1.value().timers[1].tid, 2u);
  EXPECT_EQ(p1.value().next.receiver, 5u);
  EXPECT_EQ(p1.value().next.tid, 1u);
  auto p2 = c->list_group_page(77, p1.value().next, 2).get();
  ASSERT_TRUE(p2);
  ASSERT_EQ(p2.value().timers.size(), 1u);
  EXPECT_EQ(p2.value().timers[0].receiver, 5u);
  EXPECT_EQ(p2.value().timers[0].group, 77u);
  EXPECT_TRUE(p2.value().next.end());

  auto all = c->list_group(77).get();
  ASSERT_TRUE(all) << all.error().message;
  ASSERT_EQ(all.value().size(), 3u);
  EXPECT_EQ(all.value()[2].receiver, 5u);
  auto none = c->list_group(99).get();
  ASSERT_TRUE(none);
  EXPECT_TRUE(none.value().empty());
}

TEST_F(Groups, PauseAndResumeAGroupAcrossReceivers) {
  ASSERT_TRUE(c->bind(3).get());
  ASSERT_TRUE(c->bind(5).get());
  add_in(3, 1, 77, 10);
  add_in(5, 1, 77, 20);
  add_in(5, 2, 0, 30);  // not in the group: keeps running
  auto paused = c->pause_group(77).get();
  ASSERT_TRUE(paused) << paused.error().message;
  EXPECT_EQ(paused.value(), 2u);
  EXPECT_TRUE(c->get(3, 1).get().value().paused);
  EXPECT_FALSE(c->get(5, 2).get().value().paused);
  add_in(5, 3, 77, 5);  // the group is marked paused: a new timer starts paused
  EXPECT_TRUE(c->get(5, 3).get().value().paused);

  ASSERT_TRUE(c->fast_forward(50).get());
  auto ev = take(*c, 1);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].receiver, 5u);
  EXPECT_EQ(ev[0].tid, 2u);
  EXPECT_TRUE(take(*c, 1, 200).empty());  // nothing of the group fired

  auto resumed = c->resume_group(77).get();
  ASSERT_TRUE(resumed);
  EXPECT_EQ(resumed.value(), 3u);
  auto t = c->get(3, 1).get();
  EXPECT_FALSE(t.value().paused);
  EXPECT_EQ(t.value().due, 1060u);  // the 10 ticks it had left, from now (1050)
}

TEST_F(Groups, PauseAllAndResumeAllOfAReceiver) {
  for (std::uint64_t tid = 1; tid <= 3; tid++) add_in(8, tid, 0, 10 * tid);
  ASSERT_TRUE(c->pause(8, 2).get());
  auto paused = c->pause_all(8).get();
  ASSERT_TRUE(paused);
  EXPECT_EQ(paused.value(), 2u);  // tid 2 was paused already
  for (std::uint64_t tid = 1; tid <= 3; tid++) EXPECT_TRUE(c->get(8, tid).get().value().paused);
  add_in(8, 4, 0, 5);
  EXPECT_TRUE(c->get(8, 4).get().value().paused);
  auto resumed = c->resume_all(8).get();
  ASSERT_TRUE(resumed);
  EXPECT_EQ(resumed.value(), 4u);
  for (std::uint64_t tid = 1; tid <= 4; tid++) EXPECT_FALSE(c->get(8, tid).get().value().paused);
  EXPECT_EQ(c->pause_all(999).get().value(), 0u);
}

TEST_F(Groups, CancelGroupAndGroupZero) {
  add_in(3, 1, 77, 10);
  add_in(5, 1, 77, 10);
  add_in(5, 2, 78, 10);
  auto n = c->cancel_group(77).get();
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(n.value(), 2u);
  EXPECT_EQ(c->get(3, 1).get().code(), errc::not_found);
  EXPECT_EQ(c->get(5, 1).get().code(), errc::not_found);
  EXPECT_TRUE(c->get(5, 2).get());
  EXPECT_EQ(c->cancel_group(77).get().value(), 0u);

  // Group 0 is no group: refused here, unsent, for the group calls.
  std::vector<std::string> seen;
  auto cb = [&seen](const Result<std::uint64_t>& r) { seen.push_back(r.error().message); };
  EXPECT_EQ(c->cancel_group(0, cb).get().code(), errc::bad_argument);
  EXPECT_EQ(c->pause_group(0).get().code(), errc::bad_argument);
  EXPECT_EQ(c->resume_group(0).get().code(), errc::bad_argument);
  c->poll([](const Event&) {});
  ASSERT_EQ(seen.size(), 1u);  // the callback ran on the polling thread
  EXPECT_TRUE(c->get(5, 2).get());
}
