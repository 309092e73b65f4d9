// OutputPacer: a node stream waits while an operator client's queue is over high water, reads
// on at low water, gives up after the stall limit (the client lags, and past max_lagging its
// output is dropped with one note, then a note of what was missed once it caught up); Close
// lets every wait go. The stall limit runs on a ManualClock: no test sleeps.
#include "controller/output_pacer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>

#include "tests/support/manual_clock.h"
#include "tests/support/wait_until.h"

namespace edge::controller {
namespace {

using namespace std::chrono_literals;

constexpr size_t kMiB = size_t{1} << 20;

// high 8, low 4, lagging cap 16 (MiB).
OutputPacer::Limits SmallLimits() {
  return {.high_water = 8 * kMiB, .low_water = 4 * kMiB, .max_lagging = 16 * kMiB};
}

// Queues `n` chunks of 1 MiB; returns how many were admitted (no note expected).
size_t QueueMiB(OutputPacer& p, size_t n) {
  size_t admitted = 0;
  for (size_t i = 0; i < n; ++i) {
    std::optional<OutputPacer::Note> note;
    if (p.Admit(kMiB, note)) ++admitted;
    EXPECT_FALSE(note.has_value()) << "chunk " << i << ": " << note->state;
  }
  return admitted;
}

TEST(OutputPacerTest, AStreamWaitsOverHighWaterAndReadsOnAtLowWater) {
  OutputPacer p(SmallLimits());
  EXPECT_EQ(QueueMiB(p, 8), 8u);
  EXPECT_FALSE(p.Congested()) << "8 MiB is at high water, not over it";
  EXPECT_EQ(p.WaitForRoom([] { ADD_FAILURE() << "no wait at high water"; }), 0u);
  EXPECT_EQ(QueueMiB(p, 1), 1u);
  EXPECT_TRUE(p.Congested());

  int resumed = 0;
  ASSERT_NE(p.WaitForRoom([&] { ++resumed; }), 0u);
  p.Sent(kMiB);  // 8 MiB queued: under high water, still over low water
  p.Sent(kMiB);
  p.Sent(kMiB);
  p.Sent(kMiB);
  EXPECT_EQ(resumed, 0) << "5 MiB queued is over the 4 MiB low water";
  EXPECT_FALSE(p.Congested());
  p.Sent(kMiB);
  EXPECT_EQ(resumed, 1) << "4 MiB queued: low water";
  p.Sent(kMiB);
  EXPECT_EQ(resumed, 1) << "a wait resumes once";
  EXPECT_EQ(p.queued_bytes(), 3 * kMiB);
  EXPECT_EQ(p.dropped_bytes(), 0u);
}

TEST(OutputPacerTest, WhenRoomResumesAtOnceWithoutACongestedClient) {
  auto a = std::make_shared<OutputPacer>(SmallLimits());
  int resumed = 0;
  OutputPacer::WhenRoom({}, nullptr, 10s, [&] { ++resumed; });
  EXPECT_EQ(resumed, 1);
  OutputPacer::WhenRoom({a}, nullptr, 10s, [&] { ++resumed; });  // a has room
  EXPECT_EQ(resumed, 2);
}

TEST(OutputPacerTest, WhenRoomWaitsForEveryCongestedClient) {
  auto a = std::make_shared<OutputPacer>(SmallLimits());
  auto b = std::make_shared<OutputPacer>(SmallLimits());
  QueueMiB(*a, 9);
  QueueMiB(*b, 9);
  int resumed = 0;
  OutputPacer::WhenRoom({a, b}, nullptr, 10s, [&] { ++resumed; });
  EXPECT_EQ(resumed, 0);
  a->Sent(5 * kMiB);
  EXPECT_EQ(resumed, 0) << "b is still over high water";
  b->Sent(5 * kMiB);
  EXPECT_EQ(resumed, 1);
}

TEST(OutputPacerTest, AClientThatHoldsTheStreamForTheStallLimitLagsAndItsOverflowIsDropped) {
  ManualClock clock;
  TimerQueue timers(clock);
  auto p = std::make_shared<OutputPacer>(SmallLimits());
  QueueMiB(*p, 9);
  std::atomic<int> resumed{0};
  OutputPacer::WhenRoom({p}, &timers, 10s, [&] { ++resumed; });
  clock.Advance(9s);
  timers.Poke();  // nothing is due
  EXPECT_EQ(resumed.load(), 0) << "inside the stall limit the stream waits";
  EXPECT_FALSE(p->lagging());
  clock.Advance(1s);
  ASSERT_TRUE(edge::testing::WaitUntil([&] { return resumed.load() == 1; }))
      << "the stall limit let the stream read on";
  EXPECT_TRUE(p->lagging());
  EXPECT_FALSE(p->Congested()) << "a lagging client holds no stream up";
  EXPECT_EQ(p->WaitForRoom([] { ADD_FAILURE() << "no wait for a lagging client"; }), 0u);

  // It may queue up to max_lagging (16 MiB); the chunk past it is dropped, with one note.
  EXPECT_EQ(QueueMiB(*p, 7), 7u);
  std::optional<OutputPacer::Note> note;
  EXPECT_FALSE(p->Admit(kMiB, note));
  ASSERT_TRUE(note.has_value());
  EXPECT_STREQ(note->state, kOutputDropped);
  EXPECT_NE(note->message.find("16 MiB behind"), std::string::npos) << note->message;
  note.reset();
  EXPECT_FALSE(p->Admit(kMiB, note));
  EXPECT_FALSE(note.has_value()) << "one note per run of drops";

  // Draining to 5 MiB makes room under the cap, but the run of drops lasts until low water.
  p->Sent(11 * kMiB);
  EXPECT_FALSE(p->Admit(kMiB, note));
  EXPECT_FALSE(note.has_value());
  EXPECT_EQ(p->dropped_bytes(), 3 * kMiB);

  p->Sent(kMiB);  // 4 MiB: caught up
  EXPECT_FALSE(p->lagging());
  EXPECT_TRUE(p->Admit(kMiB, note));
  ASSERT_TRUE(note.has_value());
  EXPECT_STREQ(note->state, kOutputResumed);
  EXPECT_NE(note->message.find(std::to_string(3 * kMiB) + " bytes"), std::string::npos)
      << note->message;
  note.reset();
  EXPECT_TRUE(p->Admit(kMiB, note));
  EXPECT_FALSE(note.has_value()) << "what was missed is told once";
  // Caught up, it holds the stream up again.
  QueueMiB(*p, 3);
  EXPECT_TRUE(p->Congested());
}

TEST(OutputPacerTest, DropsThatLastToTheEndOfTheOutputAreToldOnceWhenItEnds) {
  ManualClock clock;
  TimerQueue timers(clock);
  auto p = std::make_shared<OutputPacer>(SmallLimits());
  EXPECT_FALSE(p->UnreportedDrops().has_value()) << "nothing was dropped";
  QueueMiB(*p, 9);
  std::atomic<int> resumed{0};
  OutputPacer::WhenRoom({p}, &timers, 10s, [&] { ++resumed; });
  clock.Advance(10s);
  ASSERT_TRUE(edge::testing::WaitUntil([&] { return resumed.load() == 1; }));
  ASSERT_TRUE(p->lagging());
  EXPECT_EQ(QueueMiB(*p, 7), 7u);  // at the 16 MiB cap
  std::optional<OutputPacer::Note> note;
  EXPECT_FALSE(p->Admit(kMiB, note));
  EXPECT_FALSE(p->Admit(kMiB / 2, note));
  // The command ends while the client is still behind: no chunk comes to carry the tally.
  auto end = p->UnreportedDrops();
  ASSERT_TRUE(end.has_value());
  EXPECT_STREQ(end->state, kOutputResumed);
  EXPECT_NE(end->message.find(std::to_string(kMiB + kMiB / 2) + " bytes"), std::string::npos)
      << end->message;
  EXPECT_FALSE(p->UnreportedDrops().has_value()) << "told once";

  // Drops a chunk's note already told are not told again.
  auto q = std::make_shared<OutputPacer>(SmallLimits());
  QueueMiB(*q, 9);
  OutputPacer::WhenRoom({q}, &timers, 10s, [&] { ++resumed; });
  clock.Advance(10s);
  ASSERT_TRUE(edge::testing::WaitUntil([&] { return resumed.load() == 2; }));
  QueueMiB(*q, 7);
  EXPECT_FALSE(q->Admit(kMiB, note));
  q->Sent(12 * kMiB);  // down to 4 MiB: caught up
  note.reset();
  EXPECT_TRUE(q->Admit(kMiB, note));
  ASSERT_TRUE(note.has_value());
  EXPECT_STREQ(note->state, kOutputResumed);
  EXPECT_FALSE(q->UnreportedDrops().has_value());
}

TEST(OutputPacerTest, TheStallTimerOfAWaitThatEndedChangesNothing) {
  ManualClock clock;
  TimerQueue timers(clock);
  auto p = std::make_shared<OutputPacer>(SmallLimits());
  QueueMiB(*p, 9);
  std::atomic<int> first{0}, second{0};
  OutputPacer::WhenRoom({p}, &timers, 10s, [&] { ++first; });
  p->Sent(5 * kMiB);  // room: the first wait is over
  ASSERT_EQ(first.load(), 1);
  clock.Advance(5s);
  timers.Poke();
  QueueMiB(*p, 5);  // congested again: a second wait
  OutputPacer::WhenRoom({p}, &timers, 10s, [&] { ++second; });
  clock.Advance(5s);  // the first wait's timer is due: it must not cut the second one short
  ASSERT_TRUE(edge::testing::WaitUntil([&] { return timers.Pending() == 1; }))
      << "the first timer ran";
  EXPECT_EQ(second.load(), 0);
  EXPECT_FALSE(p->lagging());
  clock.Advance(5s);
  ASSERT_TRUE(edge::testing::WaitUntil([&] { return second.load() == 1; }));
  EXPECT_TRUE(p->lagging());
  EXPECT_EQ(first.load(), 1);
}

TEST(OutputPacerTest, CloseLetsEveryWaitGoAndAdmitsNothingMore) {
  auto p = std::make_shared<OutputPacer>(SmallLimits());
  QueueMiB(*p, 9);
  int resumed = 0;
  OutputPacer::WhenRoom({p}, nullptr, 10s, [&] { ++resumed; });
  OutputPacer::WhenRoom({p}, nullptr, 10s, [&] { ++resumed; });
  EXPECT_EQ(resumed, 0);
  p->Close();
  EXPECT_EQ(resumed, 2);
  EXPECT_FALSE(p->Congested());
  std::optional<OutputPacer::Note> note;
  EXPECT_FALSE(p->Admit(kMiB, note));
  EXPECT_FALSE(note.has_value());
}

}  // namespace
}  // namespace edge::controller
