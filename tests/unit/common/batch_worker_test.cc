// BatchWorker (common/batch_worker.h): what is pushed while a batch is being handled goes
// into the next batch, in order; a full queue makes the caller wait; nothing pushed is ever
// dropped — after Stop, from inside the handler, or after a handler that threw.
// And thread names (common/thread_name.h): the worker is named, and ScopedThreadName lends
// its name to the threads started under it.
#include "common/batch_worker.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <chrono>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/thread_name.h"
#include "tests/support/processes.h"
#include "tests/support/wait_until.h"

namespace edge {
namespace {

using namespace std::chrono_literals;

using testing::ThreadsNamed;

std::string ThisThreadName() {
  char buf[16] = {};
  EXPECT_EQ(pthread_getname_np(pthread_self(), buf, sizeof buf), 0);
  return buf;
}

// Records every batch; the first one waits inside the handler until released.
struct GatedHandler {
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::mutex mu;
  std::vector<std::vector<int>> batches;
  std::vector<std::thread::id> threads;

  void operator()(std::vector<int>& batch) {
    bool first = false;
    {
      std::lock_guard lock(mu);
      first = batches.empty();
      batches.push_back(batch);
      threads.push_back(std::this_thread::get_id());
    }
    if (first) {
      entered.set_value();
      released.wait();
    }
  }
  std::vector<std::vector<int>> Batches() {
    std::lock_guard lock(mu);
    return batches;
  }
};

TEST(BatchWorkerTest, WhatArrivesWhileABatchIsHandledGoesTogetherInTheNextInOrder) {
  GatedHandler h;
  BatchWorker<int> w({.name = "test-batches", .log_module = "test"},
                     [&](std::vector<int>& b) { h(b); });
  w.Push(1);
  ASSERT_EQ(h.entered.get_future().wait_for(30s), std::future_status::ready);
  EXPECT_EQ(ThreadsNamed("test-batches"), 1) << "the worker names its thread";
  for (int i = 2; i <= 6; ++i)
    w.Push(i);  // returns at once: the queue has room (a wait here would hang the test)
  h.release.set_value();
  w.Flush();
  EXPECT_EQ(h.Batches(), (std::vector<std::vector<int>>{{1}, {2, 3, 4, 5, 6}}));
  EXPECT_NE(h.threads.front(), std::this_thread::get_id()) << "handled on the worker";
  w.Stop();
  EXPECT_TRUE(testing::WaitUntil([] { return ThreadsNamed("test-batches") == 0; }))
      << "Stop ended the thread";
}

TEST(BatchWorkerTest, AFullQueueMakesTheCallerWaitForRoom) {
  GatedHandler h;
  BatchWorker<int> w({.name = "test-full", .log_module = "test", .max_items = 2},
                     [&](std::vector<int>& b) { h(b); });
  w.Push(1);
  ASSERT_EQ(h.entered.get_future().wait_for(30s), std::future_status::ready);
  w.Push(2);
  w.Push(3);  // the queue holds 2: full
  auto third = std::async(std::launch::async, [&] { w.Push(4); });
  EXPECT_EQ(third.wait_for(200ms), std::future_status::timeout) << "a full queue took one more";
  h.release.set_value();
  ASSERT_EQ(third.wait_for(30s), std::future_status::ready) << "room was made, the push went in";
  w.Flush();
  std::vector<int> all;
  for (const auto& b : h.Batches())
    all.insert(all.end(), b.begin(), b.end());
  EXPECT_EQ(all, (std::vector<int>{1, 2, 3, 4})) << "nothing dropped, in order";
  for (const auto& b : h.Batches())
    EXPECT_LE(b.size(), 2u) << "no batch beyond the bound";
}

TEST(BatchWorkerTest, TheByteBoundCountsToo) {
  GatedHandler h;
  BatchWorker<int> w(
      {.name = "test-bytes", .log_module = "test", .max_bytes = 10},
      [&](std::vector<int>& b) { h(b); }, [](const int& v) { return size_t(v); });
  w.Push(1);
  ASSERT_EQ(h.entered.get_future().wait_for(30s), std::future_status::ready);
  w.Push(6);
  auto second = std::async(std::launch::async, [&] { w.Push(5); });  // 6 + 5 > 10
  EXPECT_EQ(second.wait_for(200ms), std::future_status::timeout);
  h.release.set_value();
  ASSERT_EQ(second.wait_for(30s), std::future_status::ready);
  w.Flush();
  EXPECT_EQ(h.Batches(), (std::vector<std::vector<int>>{{1}, {6}, {5}}));
  // An item larger than the bound alone still goes (into an empty queue), never waits forever.
  w.Push(50);
  w.Flush();
  EXPECT_EQ(h.Batches().back(), std::vector<int>{50});
}

TEST(BatchWorkerTest, APushFromInsideTheHandlerIsHandledThereAtOnce) {
  std::vector<int> seen;
  BatchWorker<int>* self = nullptr;
  BatchWorker<int> w({.name = "test-inside", .log_module = "test"}, [&](std::vector<int>& b) {
    for (int v : b) {
      seen.push_back(v);
      if (v < 3) self->Push(v + 1);  // would wait for itself forever if queued behind a full queue
    }
  });
  self = &w;
  w.Push(1);
  w.Flush();
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3})) << "handled inline, depth first";
}

TEST(BatchWorkerTest, AfterStopAPushIsHandledOnItsCallersThread) {
  std::vector<std::thread::id> threads;
  std::vector<int> seen;
  BatchWorker<int> w({.name = "test-stop", .log_module = "test"}, [&](std::vector<int>& b) {
    for (int v : b) {
      seen.push_back(v);
      threads.push_back(std::this_thread::get_id());
    }
  });
  w.Push(1);
  w.Stop();  // handles 1 first
  ASSERT_EQ(seen, std::vector<int>{1});
  w.Push(2);
  EXPECT_EQ(seen, (std::vector<int>{1, 2})) << "handled before Push returned";
  EXPECT_EQ(threads.back(), std::this_thread::get_id());
  EXPECT_NE(threads.front(), std::this_thread::get_id());
  w.Flush();  // nothing queued: returns
}

TEST(BatchWorkerTest, AHandlerThatThrowsLosesOnlyItsBatchAndTheWorkerGoesOn) {
  std::vector<int> seen;
  BatchWorker<int> w({.name = "test-throw", .log_module = "test"}, [&](std::vector<int>& b) {
    if (b.front() == 1) throw std::runtime_error("the store blew up");
    seen.insert(seen.end(), b.begin(), b.end());
  });
  w.Push(1);
  w.Flush();  // counted as handled: Flush returns
  w.Push(2);
  w.Flush();
  EXPECT_EQ(seen, std::vector<int>{2});
}

TEST(ThreadNameTest, ScopedThreadNameLendsItsNameToThreadsStartedMeanwhileThenGivesItBack) {
  const ScopedThreadName outer("test-main");  // gives the test thread its name back at the end
  std::string child;
  {
    const ScopedThreadName name("test-pool-name-that-is-long");
    EXPECT_EQ(ThisThreadName(), "test-pool-name-") << "cut at the kernel's 15 bytes";
    std::thread([&] { child = ThisThreadName(); }).join();
  }
  EXPECT_EQ(child, "test-pool-name-");
  EXPECT_EQ(ThisThreadName(), "test-main");
}

}  // namespace
}  // namespace edge
