#include "controller/output_pacer.h"

#include <algorithm>
#include <utility>

namespace edge::controller {

OutputPacer::OutputPacer(Limits limits) : limits_(limits) {}

bool OutputPacer::Admit(size_t bytes, std::optional<Note>& note) {
  std::lock_guard lock(mu_);
  if (closed_) return false;  // the call is ending: nothing more is written
  // A run of drops lasts until the client is back under low water (Sent): one gap each time.
  if (dropping_ || (lagging_ && queued_ + bytes > limits_.max_lagging)) {
    dropped_total_ += bytes;
    dropped_pending_ += bytes;
    if (!dropping_) {
      dropping_ = true;
      note = Note{kOutputDropped,
                  "this client fell " + std::to_string(limits_.max_lagging >> 20) +
                      " MiB behind the command's output after holding the node's stream up as "
                      "long as it may: output is dropped until it catches up (the result still "
                      "carries the output's tail)"};
    }
    return false;
  }
  if (dropped_pending_ > 0) {
    note = Note{kOutputResumed, "caught up: " + std::to_string(dropped_pending_) +
                                    " bytes of the command's output were dropped before this"};
    dropped_pending_ = 0;
  }
  queued_ += bytes;
  return true;
}

std::optional<OutputPacer::Note> OutputPacer::UnreportedDrops() {
  std::lock_guard lock(mu_);
  if (dropped_pending_ == 0) return std::nullopt;
  Note note{kOutputResumed, "the output ended: " + std::to_string(dropped_pending_) +
                                " bytes of it were dropped for this client"};
  dropped_pending_ = 0;
  return note;
}

void OutputPacer::Sent(size_t bytes) {
  std::vector<Resume> run;
  {
    std::lock_guard lock(mu_);
    queued_ -= std::min(bytes, queued_);
    if (queued_ > limits_.low_water) return;
    lagging_ = false;  // caught up: it holds streams up again, and drops no more
    dropping_ = false;
    run = TakeWaitsLocked();
  }
  for (auto& r : run)
    r();
}

bool OutputPacer::Congested() const {
  std::lock_guard lock(mu_);
  return queued_ > limits_.high_water && !lagging_ && !closed_;
}

OutputPacer::WaitId OutputPacer::WaitForRoom(Resume resume) {
  std::lock_guard lock(mu_);
  if (queued_ <= limits_.high_water || lagging_ || closed_) return 0;
  const WaitId id = next_wait_++;
  waits_.emplace(id, std::move(resume));
  return id;
}

void OutputPacer::GiveUp(WaitId id) {
  std::vector<Resume> run;
  {
    std::lock_guard lock(mu_);
    if (waits_.find(id) == waits_.end()) return;
    lagging_ = true;  // no stream waits for this client any more
    run = TakeWaitsLocked();
  }
  for (auto& r : run)
    r();
}

void OutputPacer::Close() {
  std::vector<Resume> run;
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    run = TakeWaitsLocked();
  }
  for (auto& r : run)
    r();
}

std::vector<OutputPacer::Resume> OutputPacer::TakeWaitsLocked() {
  std::vector<Resume> run;
  run.reserve(waits_.size());
  for (auto& [id, r] : waits_)
    run.push_back(std::move(r));
  waits_.clear();
  return run;
}

size_t OutputPacer::queued_bytes() const {
  std::lock_guard lock(mu_);
  return queued_;
}

bool OutputPacer::lagging() const {
  std::lock_guard lock(mu_);
  return lagging_;
}

uint64_t OutputPacer::dropped_bytes() const {
  std::lock_guard lock(mu_);
  return dropped_total_;
}

namespace {

// One WhenRoom: counts the waits down, runs the resume after the last.
struct RoomJoin {
  std::mutex mu;
  size_t left = 1;  // the registration itself, released last
  OutputPacer::Resume resume;
  std::vector<std::pair<std::shared_ptr<OutputPacer>, OutputPacer::WaitId>> waits;

  void One() {
    OutputPacer::Resume run;
    {
      std::lock_guard lock(mu);
      if (--left == 0) run = std::move(resume);
    }
    if (run) run();
  }
};

}  // namespace

void OutputPacer::WhenRoom(const std::vector<std::shared_ptr<OutputPacer>>& pacers,
                           TimerQueue* timers, std::chrono::milliseconds stall_limit,
                           Resume resume) {
  auto join = std::make_shared<RoomJoin>();
  join->resume = std::move(resume);
  for (const auto& p : pacers) {
    {
      std::lock_guard lock(join->mu);
      ++join->left;
    }
    const WaitId id = p->WaitForRoom([join] { join->One(); });
    if (id == 0) {
      join->One();  // room already
      continue;
    }
    std::lock_guard lock(join->mu);
    join->waits.emplace_back(p, id);
  }
  bool waiting = false;
  {
    std::lock_guard lock(join->mu);
    waiting = !join->waits.empty();
  }
  // The timer is not cancelled when room comes first: GiveUp of a wait that is over does
  // nothing, and the timer holds only this join until it runs.
  if (waiting && timers != nullptr) {
    timers->After(stall_limit, [join] {
      std::vector<std::pair<std::shared_ptr<OutputPacer>, WaitId>> waits;
      {
        std::lock_guard lock(join->mu);
        waits = join->waits;
      }
      for (auto& [p, id] : waits)
        p->GiveUp(id);
    });
  }
  join->One();  // the registration's own count
}

}  // namespace edge::controller
