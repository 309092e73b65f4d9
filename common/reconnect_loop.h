// ReconnectLoop: the reconnect rule of the agent's client streams (agent/edge EdgeSession,
// agent/compute ComputeMember) in one place. A control thread calls the owner's attempt —
// connect, serve the stream until it ends — over and over, with a backoff wait between two
// attempts (common/backoff.h, full jitter; its timer on the injected clock's TimerQueue, so
// tests move a ManualClock instead of sleeping), and Envoy's reset rule (design.md §9): the
// backoff is reset only once the server has taken the new stream — the owner calls Taken()
// on its first message — so a server that accepts streams and drops them cannot cause a
// tight loop.
//
// Owns its thread and its wait; borrows the TimerQueue and the Backoff (both outlive it; the
// Backoff is only used under the loop's lock). The owner keeps its own state and status: the
// hooks run on the loop's thread (interrupt on Stop's), never under the loop's lock, so they
// may take the owner's lock, and the owner may call the loop under its own. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "common/backoff.h"
#include "common/timer_queue.h"

namespace edge {

class ReconnectLoop {
 public:
  enum class Next { kBackoff, kExit };
  struct Hooks {
    // One attempt: connect and serve the stream; returns once it is over, or at once when it
    // could not be opened. kBackoff: wait a backoff delay, then the next attempt; kExit: the
    // loop ends.
    std::function<Next()> attempt;
    // Stop(): ends the attempt in progress at once (cancel the stream, end the owner's waits)
    // and every later one. Runs on the thread that calls Stop, before it joins the loop.
    std::function<void()> interrupt;
    // The backoff timer is armed: the loop waits `delay` (the owner shows it, e.g. state
    // "backoff"). Optional.
    std::function<void(std::chrono::milliseconds delay)> backing_off;
    // Once the loop has ended (the owner shows state "stopped"). Optional.
    std::function<void()> ended;
  };

  ReconnectLoop(TimerQueue& timers, Backoff& backoff, Hooks hooks);
  ~ReconnectLoop();  // Stop()
  ReconnectLoop(const ReconnectLoop&) = delete;
  ReconnectLoop& operator=(const ReconnectLoop&) = delete;

  // Starts the thread (non-blocking); false when it was started before.
  bool Start();
  // Ends the backoff wait, interrupts the attempt (the first call only), returns once the
  // thread has ended (or at once when it never started). Idempotent. The owner calls it
  // before its own members go: the destructor's call only joins.
  void Stop();
  // The backoff wait in progress and every later one end at once: for an owner whose next
  // attempt ends the loop (the edge session once its shutdown has finished).
  void SkipBackoff();

  // A new stream is opened: the next Taken() resets the backoff.
  void StreamOpened();
  // The server took the current stream (its first message, or the owner's own proof): resets
  // the backoff, once per stream.
  void Taken();

 private:
  // What the backoff timer's callback reaches: it may run after the loop is gone.
  struct Wait {
    std::mutex mu;
    std::condition_variable cv;
    bool stop = false;
    bool skip = false;
    bool woken = false;
    bool taken = false;
  };

  void Run();
  void WaitBackoff();

  TimerQueue& timers_;
  Backoff& backoff_;
  Hooks hooks_;
  std::shared_ptr<Wait> wait_ = std::make_shared<Wait>();
  std::mutex thread_mu_;  // Start and Stop
  bool started_ = false;
  std::thread thread_;
};

}  // namespace edge
