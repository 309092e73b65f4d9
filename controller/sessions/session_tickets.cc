#include "controller/sessions/session_tickets.h"

#include <algorithm>

#include "agent/identity/encoding.h"
#include "common/random.h"

namespace edge::controller {
namespace {
constexpr size_t kTicketBytes = 32;
}  // namespace

void SessionTickets::ForgetLocked(Table::iterator it) {
  if (auto s = by_session_.find(it->second.grant.session_id); s != by_session_.end()) {
    auto& hashes = s->second;
    if (auto h = std::find(hashes.begin(), hashes.end(), it->first); h != hashes.end()) {
      hashes.erase(h);
    }
    if (hashes.empty()) by_session_.erase(s);
  }
  by_hash_.erase(it);
}

void SessionTickets::SweepLocked(Clock::MonoTime now) {
  while (!expiries_.empty() && expiries_.front().first <= now) {
    auto it = by_hash_.find(expiries_.front().second);
    if (it != by_hash_.end() && it->second.expires <= now) ForgetLocked(it);
    expiries_.pop_front();
  }
  // Spent tickets leave their expiry behind until it passes: keep the list within twice what is
  // live, so a caller who issues and spends in a loop cannot grow it.
  if (expiries_.size() > 2 * by_hash_.size() + 64) {
    std::deque<std::pair<Clock::MonoTime, std::string>> kept;
    for (auto& e : expiries_)
      if (by_hash_.count(e.second) > 0) kept.push_back(std::move(e));
    expiries_.swap(kept);
  }
}

Result<std::string> SessionTickets::Issue(const TicketGrant& grant) {
  const std::string bytes = SecureRandomBytes(kTicketBytes);
  std::lock_guard lock(mu_);
  const auto now = clock_.Monotonic();
  SweepLocked(now);
  // The session's own oldest ticket makes room for its newest — only when the new one will be
  // issued: a full table refuses without spending anything.
  auto mine = by_session_.find(grant.session_id);
  const size_t held = mine == by_session_.end() ? 0 : mine->second.size();
  const size_t freed = held >= max_per_session_ ? held - max_per_session_ + 1 : 0;
  if (by_hash_.size() - freed >= max_live_)
    return MakeError(ErrorCode::kResourceExhausted, "too many outstanding session tickets (" +
                                                        std::to_string(max_live_) +
                                                        "); try again in a minute");
  for (size_t i = 0; i < freed; ++i) {
    by_hash_.erase(mine->second.front());
    mine->second.pop_front();
  }
  std::string hash = identity::Sha256(bytes);
  by_hash_[hash] = Entry{grant, now + ttl_};
  by_session_[grant.session_id].push_back(hash);
  expiries_.emplace_back(now + ttl_, std::move(hash));
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
  Entry e = it->second;
  ForgetLocked(it);
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
  auto s = by_session_.find(session_id);
  if (s == by_session_.end()) return;
  for (const auto& hash : s->second)
    by_hash_.erase(hash);
  by_session_.erase(s);
}

size_t SessionTickets::live() const {
  std::lock_guard lock(mu_);
  return by_hash_.size();
}

}  // namespace edge::controller
