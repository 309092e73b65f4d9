// SessionRelay: the fan-out of one session between its node and its operators' sockets
// (wire.md §5.3). The session's frames form one numbered stream: every frame the relay
// publishes gets the next `seq` (from 1), goes into the replay buffer and into each socket's
// queue, so every socket of a session sees the same sequence. What it enforces:
//
//  - Replay: the buffer keeps the newest frames within `max_buffer_size` bytes. A socket
//    attaching with `last_seq` N gets the frames after N; without it, everything buffered
//    (a late joiner mirrors the session). When frames it asks for are gone, it first gets a
//    session.error REPLAY_GAP {requested_from, available_from}. A replay is read straight
//    from the buffer by a cursor (nothing is copied into the socket's queue, so a replay of
//    the whole buffer never overflows the queue); frames published meanwhile join the
//    buffer and the cursor reaches them. A replaying socket falls behind only when the
//    buffer drops a frame its cursor has not reached: `disconnect` closes it with 1013,
//    `drop_oldest` moves its cursor on and reports the frames in FRAMES_DROPPED.
//  - Slow sockets: each socket has its own bounded queue (half of `max_buffer_size`, so what
//    a socket closed for falling behind has missed is still in the replay buffer); the relay
//    hands frames to the transport only while the transport holds less than
//    `socket_high_water` bytes, so a stalled reader never stalls the node or the other
//    sockets. When a queue would overflow: `drop_oldest` drops queued agent.output frames,
//    oldest first (then other frames, oldest first, if that is not enough), and the socket
//    gets one session.error FRAMES_DROPPED {dropped, first_seq, last_seq} before its next
//    frame; `disconnect` closes the socket with 1013 (it reconnects with last_seq).
//  - Control frames (OnText): at most `rate_limit` text frames per second per session
//    (beyond: session.error RATE_LIMITED to the sender); then ParseControlFrame (a bad frame:
//    session.error INVALID_ARGUMENT to the sender; the socket stays open); then de-duplication
//    by message_id over the session's last `dedup_capacity` accepted frames (a repeat — the
//    same frame from a second device — is dropped silently); then the security filter: a
//    control.prompt.request naming a tool outside the session's pinned tools or among the
//    denied tools is dropped and only its sender gets session.error PERMISSION_DENIED.
//    An accepted frame is published in the session's stream (the "echo", keeping its
//    message_id, so the other devices mirror it and the sender sees it acknowledged with a
//    seq) and returned for the caller to act on.
//
// Frames for one socket only (errors about its own frames, FRAMES_DROPPED, REPLAY_GAP) are
// not part of the numbered stream and carry no seq; they go through the socket's bounded
// queue like the others, so a socket that floods refused frames without reading the answers
// falls behind under its policy instead of growing the queue. Frames and the relay's own
// errors are built with rawp_frame.h.
//  - The end: when the session ends, CloseAll hands each socket everything it has not been
//    given (queue, the rest of its replay) before its close frame, so the session's last
//    output and session.ended reach a reader that was behind.
//
// Thread-safe: one mutex; RelaySocket::Send and Close are called with it held and must not
// call back into the relay (the WebSocket adapter only queues). Owns its sockets'
// shared_ptrs until they detach or CloseAll.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "common/clock.h"
#include "controller/sessions/rawp_frame.h"

namespace edge::controller {

// One operator socket as the relay sees it (the WebSocket adapter implements it).
class RelaySocket {
 public:
  virtual ~RelaySocket() = default;
  // Hands one text frame to the transport; never blocks.
  virtual void Send(std::string frame) = 0;
  // Bytes handed to Send that the transport has not written yet.
  virtual size_t pending_bytes() const = 0;
  // Closes the socket with a WebSocket close code; nothing is sent after.
  virtual void Close(uint16_t code, std::string reason) = 0;
};

enum class OverflowPolicy { kDropOldest, kDisconnect };

struct RelaySettings {
  size_t rate_limit = 20;            // text frames per second per session
  size_t max_frame_size = 1 << 20;   // the longest prompt text accepted
  size_t max_buffer_size = 4 << 20;  // replay buffer in bytes (each socket's queue: half)
  OverflowPolicy policy = OverflowPolicy::kDropOldest;
  std::set<std::string, std::less<>> pinned_tools;  // the node's tools when the session began
  std::set<std::string, std::less<>> denied_tools;  // http.denied_tools
  size_t dedup_capacity = 1024;
  size_t socket_high_water = 256 << 10;
};

// WebSocket close codes the relay uses.
inline constexpr uint16_t kCloseNormal = 1000;
inline constexpr uint16_t kCloseGoingAway = 1001;
inline constexpr uint16_t kCloseTryAgainLater = 1013;

class SessionRelay {
 public:
  SessionRelay(std::string session_id, Clock& clock, RelaySettings settings);

  // Adds a socket and queues its replay. Returns the socket's id in this relay.
  uint64_t Attach(std::shared_ptr<RelaySocket> socket, std::optional<uint64_t> last_seq);
  // The socket is gone (closed by its peer or the transport). Returns how many remain.
  size_t Detach(uint64_t socket_id);
  // The transport wrote some of what it held: more of the socket's queue may be handed over.
  void OnWritable(uint64_t socket_id);

  // A text frame from a socket: the accepted control frame to act on, or nullopt when it was
  // refused (the sender has been told) or is a repeat.
  std::optional<ControlFrame> OnText(uint64_t socket_id, std::string_view text);

  // Publishes a frame in the session's numbered stream to every socket; returns its seq.
  uint64_t Publish(OutFrame frame);
  // A frame to one socket only, outside the numbered stream.
  void SendTo(uint64_t socket_id, const OutFrame& frame);
  // Closes every socket (session ended, controller stopping). With `flush_first` (the session
  // ended) each socket is first handed what it had not yet been given — the rest of its queue
  // and of its replay — so its last frames go out before the close frame; without (the
  // controller stopping: its server drops what is queued anyway) nothing more is handed over.
  void CloseAll(uint16_t code, const std::string& reason, bool flush_first = false);

  size_t sockets() const;
  uint64_t last_seq() const;
  const std::string& session_id() const { return session_id_; }

 private:
  struct Queued {
    uint64_t seq = 0;     // 0 = outside the numbered stream
    bool output = false;  // agent.output: dropped first
    std::string text;
  };
  struct Socket {
    std::shared_ptr<RelaySocket> socket;
    std::deque<Queued> queue;
    size_t queued_bytes = 0;
    // Replaying: the next seq to hand over from the replay buffer (0 = caught up: frames
    // published from now on go into `queue`).
    uint64_t cursor = 0;
    // Frames dropped since the last FRAMES_DROPPED was handed over.
    uint64_t dropped = 0, first_dropped = 0, last_dropped = 0;
  };

  // Queues `q` on `s`, applying the overflow policy; false when the socket was closed.
  bool EnqueueLocked(uint64_t id, Socket& s, Queued q);
  // Hands frames to the transport while it holds less than socket_high_water bytes; with
  // `everything`, all the socket has not been given yet (CloseAll).
  void PumpLocked(Socket& s, bool everything = false);
  // The replay buffer dropped its oldest frame, `seq`: replaying sockets that had not
  // reached it fell behind.
  void EvictedLocked(uint64_t seq);
  static void NoteDropped(Socket& s, uint64_t seq);
  uint64_t PublishLocked(const OutFrame& frame);
  // A frame for one socket, queued within its bound; false when the policy closed it.
  bool SendToLocked(uint64_t id, Socket& s, const OutFrame& frame);
  bool RateAllowsLocked();
  bool SeenLocked(const std::string& message_id) const;
  void RememberLocked(const std::string& message_id);

  const std::string session_id_;
  Clock& clock_;
  const RelaySettings settings_;
  mutable std::mutex mu_;
  uint64_t next_socket_ = 1;
  uint64_t seq_ = 0;
  std::map<uint64_t, Socket> sockets_;
  std::deque<Queued> replay_;
  size_t replay_bytes_ = 0;
  std::deque<Clock::MonoTime> recent_frames_;  // arrival times within the last second
  std::deque<std::string> seen_order_;
  std::unordered_set<std::string> seen_;
};

}  // namespace edge::controller
