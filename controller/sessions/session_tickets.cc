#include "controller/sessions/session_tickets.h"

#include "agent/identity/encoding.h"
#include "common/random.h"

namespace edge::controller {
namespace {
constexpr size_t kTicketBytes = 32;
}  // namespace

void SessionTickets::SweepLocked(Clock::MonoTime now) {
  for (auto it = by_hash_.begin(); it != by_hash_.end();) {
    if (it->second.expires <= now) {
      it = by_hash_.erase(it);
    } else {
      ++it;
    }
  }
}

Result<std::string> SessionTickets::Issue(const TicketGrant& grant) {
  const std::string bytes = SecureRandomBytes(kTicketBytes);
  std::lock_guard lock(mu_);
  const auto now = clock_.Monotonic();
  SweepLocked(now);
  if (by_hash_.size() >= max_live_)
    return MakeError(ErrorCode::kResourceExhausted, "too many outstanding session tickets (" +
                                                        std::to_string(max_live_) +
                                                        "); try again in a minute");
  by_hash_[identity::Sha256(bytes)] = Entry{grant, now + ttl_};
  return identity::Base64UrlEncode(bytes);
}

SessionTickets::Redeemed SessionTickets::Consume(std::string_view ticket,
                                                 std::string_view session_id) {
  Redeemed r;
  // 32 bytes are 43 base64url characters; anything else was never issued.
  if (ticket.size() != 43) return r;
  auto bytes = identity::Base64UrlDecode(ticket);
  if (!bytes || bytes->size() != kTicketBytes) return r;
  const std::string hash = identity::Sha256(*bytes);
  std::lock_guard lock(mu_);
  const auto now = clock_.Monotonic();
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) {
    SweepLocked(now);
    return r;
  }
  Entry e = std::move(it->second);
  by_hash_.erase(it);
  SweepLocked(now);
  if (e.expires <= now) {
    r.verdict = Verdict::kExpired;
    return r;
  }
  r.grant = std::move(e.grant);
  r.verdict = r.grant.session_id == session_id ? Verdict::kGranted : Verdict::kOtherSession;
  return r;
}

void SessionTickets::RevokeSession(std::string_view session_id) {
  std::lock_guard lock(mu_);
  for (auto it = by_hash_.begin(); it != by_hash_.end();) {
    if (it->second.grant.session_id == session_id) {
      it = by_hash_.erase(it);
    } else {
      ++it;
    }
  }
}

size_t SessionTickets::live() const {
  std::lock_guard lock(mu_);
  return by_hash_.size();
}

}  // namespace edge::controller
