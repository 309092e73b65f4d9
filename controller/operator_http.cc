#include "controller/operator_http.h"

#include <cctype>

#include "common/log.h"

namespace edge::controller {
namespace {
constexpr size_t kMaxTokenBytes = 16 << 10;
}  // namespace

std::pair<unsigned, const char*> OperatorHttp::ErrorStatus(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return {400, "INVALID_ARGUMENT"};
    case ErrorCode::kUnauthenticated:
      return {401, "UNAUTHENTICATED"};
    // Another tenant's thing is 404, never 403 (§5.1): nothing leaks.
    case ErrorCode::kPermissionDenied:
    case ErrorCode::kNotFound:
      return {404, "NOT_FOUND"};
    case ErrorCode::kResourceExhausted:
      return {429, "RATE_LIMITED"};
    case ErrorCode::kUnavailable:  // the node has no stream
      return {409, "NODE_OFFLINE"};
    case ErrorCode::kDraining:
      return {409, "NODE_DRAINING"};
    case ErrorCode::kFailedPrecondition:
      return {409, "FAILED_PRECONDITION"};
    case ErrorCode::kAborted:  // the node refused or failed the work
      return {502, "NODE_ERROR"};
    default:
      return {500, "INTERNAL"};
  }
}

std::optional<std::string_view> OperatorHttp::BearerToken(std::string_view header) {
  constexpr std::string_view kScheme = "bearer ";
  if (header.size() <= kScheme.size() || header.size() > kScheme.size() + kMaxTokenBytes) {
    return std::nullopt;
  }
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return std::nullopt;
  }
  std::string_view token = header.substr(kScheme.size());
  for (char c : token) {
    if (c <= 0x20 || c >= 0x7f) return std::nullopt;  // visible ASCII only (RFC 6750 b64token+)
  }
  return token;
}

void OperatorHttp::Refuse(const std::shared_ptr<http::Exchange>& ex, unsigned status,
                          std::string_view code, const std::string& message) const {
  const auto& req = ex->request();
  log::Get(logger_)->info(
      "{} {} from {} (request {}): {} {}", req.method, log::Escape(req.Path(), 200), req.remote,
      log::Escape(http::RequestId(req), 128), status, log::Escape(message, 512));
  http::Response resp = http::JsonError(status, code, message);
  if (status == 401) resp.headers.emplace_back("WWW-Authenticate", "Bearer");
  http::RespondEchoingRequestId(ex, std::move(resp));
}

void OperatorHttp::Fail(const std::shared_ptr<http::Exchange>& ex, const Error& e) const {
  auto [status, code] = ErrorStatus(e.code);
  Refuse(ex, status, code, e.message);
}

std::optional<TenantTokenClaims> OperatorHttp::Authenticate(
    const std::shared_ptr<http::Exchange>& ex) const {
  auto header = ex->request().Header("Authorization");
  if (!header) {
    Fail(ex, {ErrorCode::kUnauthenticated, "an Authorization: Bearer <user token> is required"});
    return std::nullopt;
  }
  auto token = BearerToken(*header);
  if (!token) {
    Fail(ex,
         {ErrorCode::kUnauthenticated, "the Authorization header is not \"Bearer <user token>\""});
    return std::nullopt;
  }
  auto claims = users_.Verify(*token);
  if (!claims) {
    Fail(ex, claims.error());
    return std::nullopt;
  }
  return std::move(*claims);
}

}  // namespace edge::controller
