// SessionTickets: the one-time tickets that open a session's WebSocket (wire.md §5.3).
// A ticket is 32 bytes from the CSPRNG, handed out once as base64url and stored only as its
// SHA-256, bound to one session and the user (and tenant) it was issued to, valid `ttl`
// (60 s). Consume removes it under the lock whatever the verdict, so of two upgrades racing
// with one ticket exactly one can win, and a ticket shown once — even to the wrong session —
// is spent. Expired entries are swept on every call; at most `max_live` tickets are
// outstanding (RESOURCE_EXHAUSTED beyond, so a caller cannot fill memory).
// Thread-safe; borrows the clock.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

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
                          size_t max_live = 100'000)
      : clock_(clock), ttl_(ttl), max_live_(max_live) {}

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
  void SweepLocked(Clock::MonoTime now);

  Clock& clock_;
  const std::chrono::seconds ttl_;
  const size_t max_live_;
  mutable std::mutex mu_;
  struct Entry {
    TicketGrant grant;
    Clock::MonoTime expires;
  };
  std::map<std::string, Entry, std::less<>> by_hash_;  // SHA-256 of the ticket bytes → entry
};

}  // namespace edge::controller
