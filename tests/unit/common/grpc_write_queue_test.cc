// WriteQueue: one write in flight, in order, and a finish only when what was due is written.
#include "common/grpc_write_queue.h"

#include <gtest/gtest.h>

#include <string>

namespace edge {
namespace {

using Queue = WriteQueue<std::string>;

TEST(WriteQueueTest, OneWriteInFlightInOrder) {
  Queue q;
  Queue::Step s = q.Push("a");
  ASSERT_NE(s.write, nullptr);
  EXPECT_EQ(*s.write, "a");
  EXPECT_FALSE(s.idle);
  EXPECT_EQ(q.Push("b").write, nullptr);  // "a" is still in flight
  EXPECT_EQ(q.Push("c").write, nullptr);
  EXPECT_EQ(q.size(), 3u);
  s = q.WriteDone(true);
  EXPECT_EQ(s.completed, "a");
  ASSERT_NE(s.write, nullptr);
  EXPECT_EQ(*s.write, "b");
  s = q.WriteDone(true);
  EXPECT_EQ(s.completed, "b");
  EXPECT_EQ(*s.write, "c");
  s = q.WriteDone(true);
  EXPECT_EQ(s.completed, "c");
  EXPECT_EQ(s.write, nullptr);
  EXPECT_TRUE(s.idle);
  EXPECT_FALSE(s.finish.has_value());
}

TEST(WriteQueueTest, FinishWaitsForTheWriteInFlightAndWhatIsQueued) {
  Queue q;
  (void)q.Push("a");
  (void)q.Push("b");
  Queue::Step s =
      q.FinishAfter(grpc::Status(grpc::StatusCode::ABORTED, "bye"), Queue::Then::kWriteQueued);
  EXPECT_FALSE(s.finish.has_value());
  EXPECT_FALSE(q.accepting());
  s = q.Push("late");
  ASSERT_EQ(s.dropped.size(), 1u);
  EXPECT_EQ(s.dropped[0], "late");
  s = q.WriteDone(true);
  EXPECT_EQ(*s.write, "b");
  EXPECT_FALSE(s.finish.has_value());
  s = q.WriteDone(true);
  ASSERT_TRUE(s.finish.has_value());
  EXPECT_EQ(s.finish->error_code(), grpc::StatusCode::ABORTED);
  // Once only.
  EXPECT_FALSE(q.FinishAfter(grpc::Status::OK, Queue::Then::kWriteQueued).finish.has_value());
  EXPECT_FALSE(q.WriteDone(true).finish.has_value());
}

TEST(WriteQueueTest, FinishCanDropWhatIsQueuedAndIsImmediateWhenIdle) {
  Queue q;
  (void)q.Push("a");
  (void)q.Push("b");
  Queue::Step s = q.FinishAfter(grpc::Status::OK, Queue::Then::kDropQueued);
  ASSERT_EQ(s.dropped.size(), 1u);
  EXPECT_EQ(s.dropped[0], "b");
  EXPECT_FALSE(s.finish.has_value());  // "a" is in flight
  s = q.WriteDone(true);
  EXPECT_EQ(s.write, nullptr);
  EXPECT_TRUE(s.finish.has_value());

  Queue idle;
  EXPECT_TRUE(idle.FinishAfter(grpc::Status::OK, Queue::Then::kWriteQueued).finish.has_value());
}

TEST(WriteQueueTest, AFailedWriteDropsEverythingAndReleasesAWaitingFinish) {
  Queue q;
  (void)q.Push("a");
  (void)q.Push("b");
  (void)q.Push("c");
  (void)q.FinishAfter(grpc::Status::OK, Queue::Then::kWriteQueued);
  Queue::Step s = q.WriteDone(false);
  EXPECT_EQ(s.completed, "a");
  EXPECT_EQ(s.dropped, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(s.write, nullptr);
  EXPECT_TRUE(s.finish.has_value());
  EXPECT_EQ(q.Push("d").dropped.size(), 1u);
}

TEST(WriteQueueTest, CloseDropsTheQueuedButNotTheWriteInFlight) {
  Queue q;
  (void)q.Push("a");
  (void)q.Push("b");
  Queue::Step s = q.Close();
  EXPECT_EQ(s.dropped, (std::vector<std::string>{"b"}));
  EXPECT_TRUE(q.writing());
  s = q.WriteDone(true);
  EXPECT_EQ(s.completed, "a");
  EXPECT_TRUE(s.idle);
  EXPECT_EQ(q.Push("c").dropped.size(), 1u);
}

TEST(WriteQueueTest, PrepareCanStampOrDropAMessageAsItsTurnComes) {
  Queue q([](std::string& m) {
    if (m == "unsealable") return false;
    m += "+sealed";
    return true;
  });
  Queue::Step s = q.Push("unsealable");
  EXPECT_EQ(s.write, nullptr);
  EXPECT_EQ(s.dropped, (std::vector<std::string>{"unsealable"}));
  s = q.Push("x");
  ASSERT_NE(s.write, nullptr);
  EXPECT_EQ(*s.write, "x+sealed");
}

}  // namespace
}  // namespace edge
