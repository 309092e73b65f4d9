// Fuzz target for the query-string parser: the input is a request target. SplitTarget must
// cut it consistently (the path holds no '?' or '#', the query no '#', both are slices of the
// input in order); ParseQuery, under small limits and the defaults, either refuses with
// INVALID_ARGUMENT and a non-empty UTF-8 message, or yields non-empty, NUL-free keys, no more
// pairs than allowed, QueryParams helpers that agree with each other, and pairs that
// EncodeQueryComponent turns back into the same pairs.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/utf8.h"
#include "http/query.h"

namespace {

using edge::http::ParseQuery;
using edge::http::QueryLimits;
using edge::http::QueryParams;

[[noreturn]] void Fail(const char* what, std::string_view detail) {
  std::fprintf(stderr, "query fuzz: %s: %.*s\n", what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

void Check(std::string_view query, const QueryLimits& limits) {
  auto parsed = ParseQuery(query, limits);
  if (!parsed) {
    if (parsed.error().code != edge::ErrorCode::kInvalidArgument) Fail("code", query);
    if (parsed.error().message.empty()) Fail("empty message", query);
    if (!edge::IsValidUtf8(parsed.error().message)) Fail("message not UTF-8", query);
    return;
  }
  if (query.size() > limits.max_bytes) Fail("over max_bytes accepted", query);
  if (parsed->size() > limits.max_params) Fail("over max_params accepted", query);
  std::string again;
  for (const auto& [k, v] : parsed->pairs()) {
    if (k.empty()) Fail("empty key", query);
    if (k.find('\0') != std::string::npos || v.find('\0') != std::string::npos) {
      Fail("NUL byte", query);
    }
    const size_t n = parsed->Count(k);
    if (n == 0) Fail("Count", k);
    auto unique = parsed->Unique(k);
    if (static_cast<bool>(unique) != (n == 1)) Fail("Unique vs Count", k);
    if (unique && (!*unique || **unique != *parsed->First(k))) Fail("Unique vs First", k);
    if (!unique && !edge::IsValidUtf8(unique.error().message)) Fail("Unique message", k);
    if (!again.empty()) again += '&';
    again += edge::http::EncodeQueryComponent(k) + "=" + edge::http::EncodeQueryComponent(v);
  }
  if (auto dup = parsed->FirstDuplicate(); dup && parsed->Count(*dup) < 2) {
    Fail("FirstDuplicate", *dup);
  }
  auto reparsed =
      ParseQuery(again, QueryLimits{.max_params = limits.max_params, .max_bytes = again.size()});
  if (!reparsed) Fail("re-encoded query refused", reparsed.error().message);
  if (reparsed->pairs() != parsed->pairs()) Fail("round trip", query);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view target(reinterpret_cast<const char*>(data), size);
  const auto parts = edge::http::SplitTarget(target);
  if (parts.path.find_first_of("?#") != std::string_view::npos) Fail("path", target);
  if (parts.query.find('#') != std::string_view::npos) Fail("query", target);
  if (parts.path.data() != target.data()) Fail("path start", target);
  if (parts.has_query) {
    if (parts.query.data() != target.data() + parts.path.size() + 1) Fail("query start", target);
  } else if (!parts.query.empty()) {
    Fail("query without '?'", target);
  }
  Check(parts.query, QueryLimits{.max_params = 8, .max_bytes = 256});
  Check(parts.query, QueryLimits{});
  // The whole input as a query, too: '?' and '#' bytes then reach the parser.
  Check(target, QueryLimits{});
  return 0;
}
