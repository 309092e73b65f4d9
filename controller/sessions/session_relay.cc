#include "controller/sessions/session_relay.h"

#include <algorithm>
#include <utility>

namespace edge::controller {

SessionRelay::SessionRelay(std::string session_id, Clock& clock, RelaySettings settings)
    : session_id_(std::move(session_id)), clock_(clock), settings_(std::move(settings)) {}

uint64_t SessionRelay::Attach(std::shared_ptr<RelaySocket> socket,
                              std::optional<uint64_t> last_seq) {
  std::lock_guard lock(mu_);
  const uint64_t id = next_socket_++;
  Socket& s = sockets_[id];
  s.socket = std::move(socket);
  const uint64_t oldest = replay_.empty() ? seq_ + 1 : replay_.front().seq;
  const uint64_t from = last_seq ? *last_seq + 1 : 1;
  if (last_seq && *last_seq > seq_) {
    if (!SendToLocked(
            id, s,
            SessionError(session_id_, "INVALID_ARGUMENT",
                         "last_seq " + std::to_string(*last_seq) +
                             " is beyond the session's latest seq " + std::to_string(seq_)))) {
      return id;
    }
  } else if (from < oldest && from <= seq_) {
    OutFrame gap =
        SessionError(session_id_, "REPLAY_GAP",
                     "frames " + std::to_string(from) + ".." + std::to_string(oldest - 1) +
                         " are no longer in the replay buffer");
    gap.payload["requested_from"] = from;
    gap.payload["available_from"] = oldest;
    if (!SendToLocked(id, s, gap)) return id;
  }
  if (!replay_.empty() && replay_.back().seq >= from) s.cursor = std::max(from, oldest);
  PumpLocked(s);
  return id;
}

size_t SessionRelay::Detach(uint64_t socket_id) {
  std::lock_guard lock(mu_);
  sockets_.erase(socket_id);
  return sockets_.size();
}

void SessionRelay::OnWritable(uint64_t socket_id) {
  std::lock_guard lock(mu_);
  auto it = sockets_.find(socket_id);
  if (it != sockets_.end()) PumpLocked(it->second);
}

void SessionRelay::NoteDropped(Socket& s, uint64_t seq) {
  if (seq > 0) {
    if (s.first_dropped == 0 || seq < s.first_dropped) s.first_dropped = seq;
    s.last_dropped = std::max(s.last_dropped, seq);
  }
  ++s.dropped;
}

bool SessionRelay::EnqueueLocked(uint64_t id, Socket& s, Queued q) {
  // Half the replay buffer: a socket closed for falling behind still finds what it missed.
  const size_t cap = settings_.max_buffer_size / 2;
  if (s.queued_bytes + q.text.size() > cap) {
    if (settings_.policy == OverflowPolicy::kDisconnect) {
      s.socket->Close(kCloseTryAgainLater, "too slow: more than " + std::to_string(cap) +
                                               " bytes queued; reconnect with last_seq");
      sockets_.erase(id);
      return false;
    }
    auto drop = [&](auto it) {
      NoteDropped(s, it->seq);
      s.queued_bytes -= it->text.size();
      return s.queue.erase(it);
    };
    // agent.output first, oldest first; then anything, oldest first.
    for (auto it = s.queue.begin(); it != s.queue.end() && s.queued_bytes + q.text.size() > cap;) {
      it = it->output ? drop(it) : std::next(it);
    }
    while (!s.queue.empty() && s.queued_bytes + q.text.size() > cap)
      drop(s.queue.begin());
    if (q.text.size() > cap) {  // cannot fit even alone
      NoteDropped(s, q.seq);
      return true;
    }
  }
  s.queued_bytes += q.text.size();
  s.queue.push_back(std::move(q));
  return true;
}

void SessionRelay::PumpLocked(Socket& s, bool everything) {
  while (everything || s.socket->pending_bytes() < settings_.socket_high_water) {
    if (s.dropped > 0) {
      OutFrame f = SessionError(session_id_, "FRAMES_DROPPED",
                                std::to_string(s.dropped) +
                                    " frames were dropped because this socket fell behind "
                                    "(buffer_overflow_policy drop_oldest)");
      f.payload["dropped"] = s.dropped;
      if (s.first_dropped > 0) {
        f.payload["first_seq"] = s.first_dropped;
        f.payload["last_seq"] = s.last_dropped;
      }
      s.dropped = s.first_dropped = s.last_dropped = 0;
      s.socket->Send(SerializeFrame(f, 0, clock_));
      continue;
    }
    if (s.queue.empty()) {
      if (s.cursor == 0) return;
      // The replay, from the buffer (seqs rise; a frame too large for it is not there).
      auto it = std::lower_bound(replay_.begin(), replay_.end(), s.cursor,
                                 [](const Queued& q, uint64_t seq) { return q.seq < seq; });
      if (it == replay_.end()) {
        s.cursor = 0;
        return;
      }
      s.cursor = it->seq + 1 > seq_ ? 0 : it->seq + 1;
      s.socket->Send(it->text);
      continue;
    }
    Queued q = std::move(s.queue.front());
    s.queue.pop_front();
    s.queued_bytes -= q.text.size();
    s.socket->Send(std::move(q.text));
  }
}

bool SessionRelay::SendToLocked(uint64_t id, Socket& s, const OutFrame& frame) {
  // Outside the numbered stream, but behind what is already queued for the socket, and within
  // the same bound: a socket that sends refused frames without reading the answers (each
  // answer is larger than the frame that caused it) fills only its own queue, under its
  // policy, like a reader that fell behind.
  if (!EnqueueLocked(id, s, Queued{0, false, SerializeFrame(frame, 0, clock_)})) return false;
  PumpLocked(s);
  return true;
}

void SessionRelay::SendTo(uint64_t socket_id, const OutFrame& frame) {
  std::lock_guard lock(mu_);
  auto it = sockets_.find(socket_id);
  if (it != sockets_.end()) (void)SendToLocked(socket_id, it->second, frame);
}

uint64_t SessionRelay::Publish(OutFrame frame) {
  std::lock_guard lock(mu_);
  return PublishLocked(frame);
}

uint64_t SessionRelay::PublishLocked(const OutFrame& frame) {
  const uint64_t seq = ++seq_;
  const bool output = frame.type == "agent.output";
  std::string text = SerializeFrame(frame, seq, clock_);
  if (text.size() <= settings_.max_buffer_size) {
    replay_.push_back(Queued{seq, output, text});
    replay_bytes_ += text.size();
    while (replay_bytes_ > settings_.max_buffer_size) {
      replay_bytes_ -= replay_.front().text.size();
      const uint64_t evicted = replay_.front().seq;
      replay_.pop_front();
      EvictedLocked(evicted);
    }
  }
  const bool buffered = !replay_.empty() && replay_.back().seq == seq;
  for (auto it = sockets_.begin(); it != sockets_.end();) {
    const uint64_t id = it->first;
    Socket& s = it->second;
    ++it;  // EnqueueLocked may erase this socket
    if (s.cursor != 0) {
      // Replaying: the cursor reaches the frame in the buffer (one too large for the buffer
      // is reported as dropped).
      if (!buffered) NoteDropped(s, seq);
      PumpLocked(s);
      continue;
    }
    if (EnqueueLocked(id, s, Queued{seq, output, text})) PumpLocked(s);
  }
  return seq;
}

void SessionRelay::EvictedLocked(uint64_t seq) {
  for (auto it = sockets_.begin(); it != sockets_.end();) {
    Socket& s = it->second;
    if (s.cursor == 0 || s.cursor > seq) {
      ++it;
      continue;
    }
    if (settings_.policy == OverflowPolicy::kDisconnect) {
      s.socket->Close(kCloseTryAgainLater,
                      "too slow: the replay buffer dropped frame " + std::to_string(seq) +
                          " before this socket read it; reconnect with last_seq");
      it = sockets_.erase(it);
      continue;
    }
    NoteDropped(s, seq);
    s.cursor = seq + 1 > seq_ ? 0 : seq + 1;
    ++it;
  }
}

void SessionRelay::CloseAll(uint16_t code, const std::string& reason, bool flush_first) {
  std::lock_guard lock(mu_);
  for (auto& [id, s] : sockets_) {
    // What the socket has not been given yet (its queue, the rest of its replay, a pending
    // FRAMES_DROPPED) goes to the transport now, whatever it holds: the session's last frames
    // (its final output, session.ended) are written before the close frame, and there is no
    // replay to come back to once the session is gone. Bounded: a queue holds at most half
    // the replay buffer, a replay at most the buffer; the transport's write timeout ends a
    // reader that never reads.
    if (flush_first) PumpLocked(s, /*everything=*/true);
    s.socket->Close(code, reason);
  }
  sockets_.clear();
}

size_t SessionRelay::sockets() const {
  std::lock_guard lock(mu_);
  return sockets_.size();
}

uint64_t SessionRelay::last_seq() const {
  std::lock_guard lock(mu_);
  return seq_;
}

bool SessionRelay::RateAllowsLocked() {
  const auto now = clock_.Monotonic();
  while (!recent_frames_.empty() && now - recent_frames_.front() >= std::chrono::seconds(1))
    recent_frames_.pop_front();
  if (recent_frames_.size() >= settings_.rate_limit) return false;
  recent_frames_.push_back(now);
  return true;
}

bool SessionRelay::SeenLocked(const std::string& message_id) const {
  return seen_.count(message_id) > 0;
}

void SessionRelay::RememberLocked(const std::string& message_id) {
  seen_.insert(message_id);
  seen_order_.push_back(message_id);
  while (seen_order_.size() > settings_.dedup_capacity) {
    seen_.erase(seen_order_.front());
    seen_order_.pop_front();
  }
}

std::optional<ControlFrame> SessionRelay::OnText(uint64_t socket_id, std::string_view text) {
  std::lock_guard lock(mu_);
  auto it = sockets_.find(socket_id);
  if (it == sockets_.end()) return std::nullopt;
  Socket& s = it->second;
  if (!RateAllowsLocked()) {
    (void)SendToLocked(socket_id, s,
                       SessionError(session_id_, "RATE_LIMITED",
                                    "more than " + std::to_string(settings_.rate_limit) +
                                        " frames per second on this session; frame dropped"));
    return std::nullopt;
  }
  auto frame = ParseControlFrame(text, session_id_, settings_.max_frame_size);
  if (!frame) {
    (void)SendToLocked(socket_id, s,
                       SessionError(session_id_, "INVALID_ARGUMENT", frame.error().message));
    return std::nullopt;
  }
  // Message ids compare in lower case: the same UUID in either case is the same frame.
  std::string key = frame->message_id;
  std::transform(key.begin(), key.end(), key.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (SeenLocked(key)) return std::nullopt;
  if (frame->type == "control.prompt.request") {
    if (auto tools = frame->payload.find("tools"); tools != frame->payload.end()) {
      for (const auto& t : *tools) {
        const auto& name = t.get_ref<const std::string&>();
        const bool denied = settings_.denied_tools.count(name) > 0;
        if (denied || settings_.pinned_tools.count(name) == 0) {
          (void)SendToLocked(
              socket_id, s,
              SessionError(session_id_, "PERMISSION_DENIED",
                           "tool \"" + name + "\" " +
                               (denied ? "is denied on the operator API (http.denied_tools)"
                                       : "is not among the session's pinned tools") +
                               "; frame dropped",
                           frame->message_id));
          return std::nullopt;
        }
      }
    }
  }
  RememberLocked(key);
  OutFrame echo;
  echo.type = frame->type;
  echo.session_id = session_id_;
  echo.turn_id = frame->turn_id;
  echo.payload = frame->payload;
  echo.message_id = frame->message_id;
  echo.timestamp = frame->timestamp;
  PublishLocked(echo);
  return std::move(*frame);
}

}  // namespace edge::controller
