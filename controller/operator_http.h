// OperatorHttp: what every handler of the operator's REST API shares (wire.md §5.1) — the
// user-token authentication of `Authorization: Bearer <token>` and the {"code","message"}
// error answers, logged and echoing X-Request-ID. OperatorApi (§5.2) and the fleet extension
// (FleetApi) both answer through it, so the rules live in one place. Borrows the tokens;
// thread-safe (stateless apart from them).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/error.h"
#include "controller/tenant_tokens.h"
#include "http/router.h"

namespace edge::controller {

class OperatorHttp {
 public:
  // `logger`: the log the refusals go to ("operator_api", "fleet_api").
  OperatorHttp(const TenantTokens& users, std::string logger)
      : users_(users), logger_(std::move(logger)) {}

  // The HTTP status and §5.1 code for an error of the tokens or the domain layer:
  // INVALID_ARGUMENT 400, UNAUTHENTICATED 401, NOT_FOUND and PERMISSION_DENIED 404 (another
  // tenant's thing is 404, never 403: nothing leaks), RESOURCE_EXHAUSTED 429 RATE_LIMITED,
  // anything else 500 INTERNAL.
  static std::pair<unsigned, const char*> ErrorStatus(ErrorCode code);
  // The token of an `Authorization: Bearer <token>` value; nullopt when the header is not
  // exactly that (scheme case-insensitive, one space, a token of visible ASCII, ≤ 16 KiB).
  static std::optional<std::string_view> BearerToken(std::string_view header);

  // The caller's verified claims; otherwise answers 401 UNAUTHENTICATED itself (with
  // `WWW-Authenticate: Bearer`) and returns nullopt.
  std::optional<TenantTokenClaims> Authenticate(const std::shared_ptr<http::Exchange>& ex) const;
  // Answers `e` with ErrorStatus's status and code.
  void Fail(const std::shared_ptr<http::Exchange>& ex, const Error& e) const;
  // Answers {"code","message"} with `status` (logged; 401 adds WWW-Authenticate).
  void Refuse(const std::shared_ptr<http::Exchange>& ex, unsigned status, std::string_view code,
              const std::string& message) const;

 private:
  const TenantTokens& users_;
  const std::string logger_;
};

}  // namespace edge::controller
