// One-time WebSocket tickets (wire.md §5.3): single use under concurrency, expiry, binding.
#include "controller/sessions/session_tickets.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "tests/support/manual_clock.h"

namespace edge::controller {
namespace {

using V = SessionTickets::Verdict;

TEST(SessionTicketsTest, ATicketOpensItsSessionOnce) {
  ManualClock clock;
  SessionTickets tickets(clock);
  auto t = tickets.Issue({"s1", "alice", "t1"});
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->size(), 43u);  // 32 bytes, base64url without padding
  EXPECT_EQ(
      t->find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
      std::string::npos);
  auto r = tickets.Consume(*t, "s1");
  EXPECT_EQ(r.verdict, V::kGranted);
  EXPECT_EQ(r.grant.user, "alice");
  EXPECT_EQ(r.grant.tenant, "t1");
  EXPECT_EQ(tickets.Consume(*t, "s1").verdict, V::kUnknown);
  EXPECT_EQ(tickets.live(), 0u);
  // Two tickets are never alike.
  EXPECT_NE(*tickets.Issue({"s1", "alice", "t1"}), *tickets.Issue({"s1", "alice", "t1"}));
}

TEST(SessionTicketsTest, ExpiredAfterSixtySeconds) {
  ManualClock clock;
  SessionTickets tickets(clock);
  auto fresh = tickets.Issue({"s1", "alice", "t1"});
  auto old = tickets.Issue({"s1", "alice", "t1"});
  clock.Advance(std::chrono::seconds(59));
  EXPECT_EQ(tickets.Consume(*fresh, "s1").verdict, V::kGranted);
  clock.Advance(std::chrono::seconds(1));
  EXPECT_EQ(tickets.Consume(*old, "s1").verdict, V::kExpired);
  EXPECT_EQ(tickets.Consume(*old, "s1").verdict, V::kUnknown);
}

TEST(SessionTicketsTest, AnotherSessionsTicketIsRefusedAndSpent) {
  ManualClock clock;
  SessionTickets tickets(clock);
  auto t = tickets.Issue({"s1", "alice", "t1"});
  auto r = tickets.Consume(*t, "s2");
  EXPECT_EQ(r.verdict, V::kOtherSession);
  EXPECT_EQ(r.grant.session_id, "s1");
  EXPECT_EQ(tickets.Consume(*t, "s1").verdict, V::kUnknown);
}

TEST(SessionTicketsTest, MalformedTicketsAreUnknown) {
  ManualClock clock;
  SessionTickets tickets(clock);
  auto t = tickets.Issue({"s1", "alice", "t1"});
  for (std::string bad : {std::string(), std::string("x"), std::string(43, '*'),
                          std::string(44, 'A'), t->substr(0, 42), *t + "A"}) {
    EXPECT_EQ(tickets.Consume(bad, "s1").verdict, V::kUnknown) << bad;
  }
  // Flipping one character makes another ticket (never issued).
  std::string flipped = *t;
  flipped[0] = flipped[0] == 'A' ? 'B' : 'A';
  EXPECT_EQ(tickets.Consume(flipped, "s1").verdict, V::kUnknown);
  EXPECT_EQ(tickets.Consume(*t, "s1").verdict, V::kGranted);
}

TEST(SessionTicketsTest, OfManyRacingUpgradesExactlyOneWins) {
  ManualClock clock;
  SessionTickets tickets(clock);
  for (int round = 0; round < 20; ++round) {
    auto t = tickets.Issue({"s1", "alice", "t1"});
    std::atomic<int> granted{0}, unknown{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&] {
        auto v = tickets.Consume(*t, "s1").verdict;
        (v == V::kGranted ? granted : unknown)++;
      });
    }
    for (auto& th : threads)
      th.join();
    EXPECT_EQ(granted.load(), 1);
    EXPECT_EQ(unknown.load(), 7);
  }
}

TEST(SessionTicketsTest, EndedSessionsLoseTheirTicketsAndTheCountIsBounded) {
  ManualClock clock;
  SessionTickets tickets(clock, std::chrono::seconds(60), 3);
  auto a = tickets.Issue({"s1", "alice", "t1"});
  auto b = tickets.Issue({"s2", "alice", "t1"});
  ASSERT_TRUE(tickets.Issue({"s2", "bob", "t1"}));
  auto full = tickets.Issue({"s3", "bob", "t1"});
  ASSERT_FALSE(full.has_value());
  EXPECT_EQ(full.error().code, ErrorCode::kResourceExhausted);
  tickets.RevokeSession("s2");
  EXPECT_EQ(tickets.live(), 1u);
  EXPECT_EQ(tickets.Consume(*b, "s2").verdict, V::kUnknown);
  EXPECT_EQ(tickets.Consume(*a, "s1").verdict, V::kGranted);
  // Expired ones free their places.
  ASSERT_TRUE(tickets.Issue({"s4", "bob", "t1"}));
  ASSERT_TRUE(tickets.Issue({"s4", "bob", "t1"}));
  ASSERT_TRUE(tickets.Issue({"s4", "bob", "t1"}));
  EXPECT_FALSE(tickets.Issue({"s4", "bob", "t1"}));
  clock.Advance(std::chrono::seconds(61));
  EXPECT_TRUE(tickets.Issue({"s4", "bob", "t1"}));
}

TEST(SessionTicketsTest, AUserAskingInALoopReplacesTheirOwnTicketsAndBlocksNoOne) {
  ManualClock clock;
  SessionTickets tickets(clock, std::chrono::seconds(60), /*max_live=*/100, /*per_session=*/8);
  auto first = tickets.Issue({"m", "mallory", "t-a"});
  ASSERT_TRUE(first);
  std::string last;
  for (int i = 0; i < 100000; ++i) {
    auto t = tickets.Issue({"m", "mallory", "t-a"});
    ASSERT_TRUE(t) << i;
    last = *t;
  }
  EXPECT_EQ(tickets.live(), 8u);  // the session's newest eight
  // Another tenant's user still gets tickets.
  auto other = tickets.Issue({"a", "alice", "t-b"});
  ASSERT_TRUE(other) << other.error().message;
  EXPECT_EQ(tickets.Consume(*other, "a").verdict, V::kGranted);
  // The newest works; the oldest was spent by the ones after it.
  EXPECT_EQ(tickets.Consume(last, "m").verdict, V::kGranted);
  EXPECT_EQ(tickets.Consume(*first, "m").verdict, V::kUnknown);
  EXPECT_EQ(tickets.live(), 7u);
  tickets.RevokeSession("m");
  EXPECT_EQ(tickets.live(), 0u);
}

TEST(SessionTicketsTest, AFullTableRefusesWithoutSpendingTheSessionsTickets) {
  ManualClock clock;
  SessionTickets tickets(clock, std::chrono::seconds(60), /*max_live=*/3, /*per_session=*/2);
  auto m1 = tickets.Issue({"m", "mallory", "t1"});
  auto m2 = tickets.Issue({"m", "mallory", "t1"});
  ASSERT_TRUE(tickets.Issue({"a", "alice", "t1"}));
  // Full, but "m" is at its own cap: its oldest makes room, the table stays at 3.
  auto m3 = tickets.Issue({"m", "mallory", "t1"});
  ASSERT_TRUE(m3);
  EXPECT_EQ(tickets.Consume(*m1, "m").verdict, V::kUnknown);
  // Full, and "b" has none to give: refused, and nobody's ticket was spent.
  auto b = tickets.Issue({"b", "bob", "t1"});
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(tickets.live(), 3u);
  EXPECT_EQ(tickets.Consume(*m2, "m").verdict, V::kGranted);
}

TEST(SessionTicketsTest, ExpiredTicketsLeaveTheTableAtTheNextCall) {
  ManualClock clock;
  SessionTickets tickets(clock);
  for (int s = 0; s < 50; ++s)
    ASSERT_TRUE(tickets.Issue({"s" + std::to_string(s), "alice", "t1"}));
  clock.Advance(std::chrono::seconds(30));
  auto later = tickets.Issue({"late", "alice", "t1"});
  ASSERT_TRUE(later);
  EXPECT_EQ(tickets.live(), 51u);
  clock.Advance(std::chrono::seconds(30));  // the first fifty expire, the late one not
  EXPECT_EQ(tickets.live(), 51u);           // swept by the next Issue or Consume
  EXPECT_TRUE(tickets.Issue({"s0", "alice", "t1"}));
  EXPECT_EQ(tickets.live(), 2u);
  EXPECT_EQ(tickets.Consume(*later, "late").verdict, V::kGranted);
}

}  // namespace
}  // namespace edge::controller
