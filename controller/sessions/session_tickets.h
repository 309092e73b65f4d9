// SessionTickets: the one-time tickets that open a session's WebSocket (wire.md §5.3).
// A ticket is 32 bytes from the CSPRNG, handed out once as base64url and stored only as its
// SHA-256, bound to one session and the user (and tenant) it was issued to, valid `ttl`
// (60 s). Consume removes it under the lock whatever the verdict, so of two upgrades racing
// with one ticket exactly one can win, and a ticket shown once — even to the wrong session —
// is spent. At most `max_per_session` (8) tickets of one session are outstanding: issuing one
// more spends that session's oldest, so a user who asks in a loop keeps replacing their own
// tickets and never fills the table others need; at most `max_live` in all (RESOURCE_EXHAUSTED
// beyond). Expired entries are swept in expiry order on every call (the cost is the number
// that expired, not the table's size).
// Thread-safe; borrows the clock.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "common/clock.h"
#include "common/error.h"

namespace edge::controller {

struct TicketGrant {
  std::string session_id;
  std::string user;
  std::string tenant;
};

class SessionTickets {
 public:
  explicit SessionTickets(Clock& clock, std::chrono::seconds ttl = std::chrono::seconds(60),
                          size_t max_live = 100'000, size_t max_per_session = 8)
      : clock_(clock), ttl_(ttl), max_live_(max_live), max_per_session_(max_per_session) {}

  // A fresh ticket for `grant`.
  Result<std::string> Issue(const TicketGrant& grant);

  enum class Verdict {
    kGranted,       // the ticket was valid for this session (now spent)
    kUnknown,       // never issued, already used, malformed, or of an ended session → 401
    kExpired,       // issued but older than ttl → 401
    kOtherSession,  // valid, but for another session (now spent) → 403
  };
  struct Redeemed {
    Verdict verdict = Verdict::kUnknown;
    TicketGrant grant;  // set for kGranted and kOtherSession
  };
  Redeemed Consume(std::string_view ticket, std::string_view session_id);

  // Forgets every ticket of `session_id` (the session ended).
  void RevokeSession(std::string_view session_id);

  size_t live() const;

 private:
  struct Entry {
    TicketGrant grant;
    Clock::MonoTime expires;
  };
  using Table = std::map<std::string, Entry, std::less<>>;

  void SweepLocked(Clock::MonoTime now);
  // Removes the entry and its place in its session's list.
  void ForgetLocked(Table::iterator it);

  Clock& clock_;
  const std::chrono::seconds ttl_;
  const size_t max_live_;
  const size_t max_per_session_;
  mutable std::mutex mu_;
  Table by_hash_;  // SHA-256 of the ticket bytes → entry
  // Each session's outstanding tickets (hashes), oldest first.
  std::map<std::string, std::deque<std::string>, std::less<>> by_session_;
  // (expiry, hash) in issue order, which is expiry order (one ttl); entries already consumed
  // or revoked stay until their expiry passes or the list is compacted.
  std::deque<std::pair<Clock::MonoTime, std::string>> expiries_;
};

}  // namespace edge::controller
