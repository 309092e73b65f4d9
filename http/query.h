// Query strings of request targets ("/v1/edge/ws/stream?ticket=…&session_id=…"): splitting a
// target into path and query, and parsing the query into decoded key/value pairs. Stateless
// functions and plain values; used by the handlers that take query parameters (the operator
// API: the WebSocket relay, metrics periods, session filters). The Router matches the path
// only (Request::Path) and leaves the query to the route (Request::Query + ParseQuery).
//
// Rules (application/x-www-form-urlencoded as the WHATWG URL standard reads it, stricter
// where noted):
// - Pairs are separated by '&'; empty pieces ("a=1&&b=2", a trailing '&') are skipped.
// - A pair splits at its first '='; a piece without '=' is a key with an empty value.
// - '+' decodes to a space and %XX (either case) to that byte, in keys and values alike.
// - Refused with INVALID_ARGUMENT naming the parameter and the byte offset in the query: a
//   '%' not followed by two hex digits, an empty key ("=v"), a decoded NUL byte (stricter
//   than WHATWG, which keeps it), more than `max_params` pairs, a query longer than
//   `max_bytes`. Decoded bytes are not checked for UTF-8 (a caller that needs text checks).
// - Duplicate keys are kept, in order; QueryParams::Unique refuses a key given twice, so a
//   caller that wants one value per key says so where it reads it.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"

namespace edge::http {

// A request target cut at the first '?' (the query) and the first '#' after it (a fragment,
// which clients do not send; it is dropped). "/a?x=1" → {"/a", "x=1", true}; "/a" → {"/a",
// "", false}; "/a?" → {"/a", "", true}.
struct TargetParts {
  std::string_view path;
  std::string_view query;
  bool has_query = false;
};
TargetParts SplitTarget(std::string_view target);

struct QueryLimits {
  size_t max_params = 64;
  size_t max_bytes = 8 << 10;  // of the raw (still encoded) query
};

// The decoded pairs of a query, in their order, duplicates included.
class QueryParams {
 public:
  using Pair = std::pair<std::string, std::string>;

  QueryParams() = default;
  explicit QueryParams(std::vector<Pair> pairs) : pairs_(std::move(pairs)) {}

  const std::vector<Pair>& pairs() const { return pairs_; }
  size_t size() const { return pairs_.size(); }
  bool empty() const { return pairs_.empty(); }

  // How many times `key` appears.
  size_t Count(std::string_view key) const;
  // The first value of `key`; nullopt when absent.
  std::optional<std::string_view> First(std::string_view key) const;
  // The value of `key` when it appears once, nullopt when absent; INVALID_ARGUMENT naming the
  // key and the count when it appears more than once.
  Result<std::optional<std::string>> Unique(std::string_view key) const;
  // The first key that appears more than once (in order of its second appearance).
  std::optional<std::string> FirstDuplicate() const;
  // The first key not in `allowed` (for endpoints that refuse unknown parameters).
  std::optional<std::string> FirstKeyOutside(std::initializer_list<std::string_view> allowed) const;

 private:
  std::vector<Pair> pairs_;
};

// Parses a raw query (the part after '?', without it). INVALID_ARGUMENT as described above;
// the message names the (escaped, shortened) raw key and the byte offset in `query`.
Result<QueryParams> ParseQuery(std::string_view query, const QueryLimits& limits = {});

// The form encoding of `s` (unreserved bytes as they are, ' ' as '+', every other byte as
// %XX); ParseQuery decodes it back to `s`. For building targets (tests, clients).
std::string EncodeQueryComponent(std::string_view s);

}  // namespace edge::http
