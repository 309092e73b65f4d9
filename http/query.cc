#include "http/query.h"

#include <algorithm>
#include <set>

#include "common/log.h"

namespace edge::http {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// How a parameter is named in an error: its raw key, escaped for the message, and where the
// pair starts.
std::string Name(std::string_view raw_key, size_t offset) {
  return "query parameter \"" + log::Escape(raw_key, 64) + "\" (at byte " + std::to_string(offset) +
         ")";
}

// Decodes `raw` (which starts at `offset` in the query) into `out`; on a bad escape or a NUL
// byte the message names the parameter and the offending byte's offset.
Status Decode(std::string_view raw, size_t offset, std::string_view raw_key, size_t pair_offset,
              std::string& out) {
  out.clear();
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    const size_t at = offset + i;  // where this (possibly escaped) byte starts
    char c = raw[i];
    if (c == '+') {
      c = ' ';
    } else if (c == '%') {
      const int hi = i + 1 < raw.size() ? HexValue(raw[i + 1]) : -1;
      const int lo = i + 2 < raw.size() ? HexValue(raw[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        return MakeError(ErrorCode::kInvalidArgument,
                         Name(raw_key, pair_offset) + ": \"" + log::Escape(raw.substr(i, 3), 16) +
                             "\" at byte " + std::to_string(at) +
                             " is not a percent-escape (% and two hex digits)");
      }
      c = static_cast<char>(hi << 4 | lo);
      i += 2;
    }
    if (c == '\0') {
      return MakeError(ErrorCode::kInvalidArgument,
                       Name(raw_key, pair_offset) + ": a NUL byte at byte " + std::to_string(at) +
                           " (NUL is not allowed in a query)");
    }
    out.push_back(c);
  }
  return OkStatus();
}

bool Unreserved(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~' || c == '*';
}

}  // namespace

TargetParts SplitTarget(std::string_view target) {
  TargetParts parts;
  const size_t cut = target.find_first_of("?#");
  parts.path = target.substr(0, cut);
  if (cut == std::string_view::npos || target[cut] == '#') return parts;
  parts.has_query = true;
  std::string_view rest = target.substr(cut + 1);
  parts.query = rest.substr(0, rest.find('#'));
  return parts;
}

size_t QueryParams::Count(std::string_view key) const {
  return static_cast<size_t>(
      std::count_if(pairs_.begin(), pairs_.end(), [&](const Pair& p) { return p.first == key; }));
}

std::optional<std::string_view> QueryParams::First(std::string_view key) const {
  for (const auto& [k, v] : pairs_) {
    if (k == key) return std::string_view(v);
  }
  return std::nullopt;
}

Result<std::optional<std::string>> QueryParams::Unique(std::string_view key) const {
  const size_t n = Count(key);
  if (n > 1) {
    return MakeError(ErrorCode::kInvalidArgument, "query parameter \"" + log::Escape(key, 64) +
                                                      "\" is given " + std::to_string(n) +
                                                      " times; it may appear once");
  }
  if (n == 0) return std::optional<std::string>();
  return std::optional<std::string>(std::string(*First(key)));
}

std::optional<std::string> QueryParams::FirstDuplicate() const {
  std::set<std::string_view> seen;
  for (const auto& p : pairs_) {
    if (!seen.insert(p.first).second) return p.first;
  }
  return std::nullopt;
}

std::optional<std::string> QueryParams::FirstKeyOutside(
    std::initializer_list<std::string_view> allowed) const {
  for (const auto& p : pairs_) {
    if (std::find(allowed.begin(), allowed.end(), p.first) == allowed.end()) return p.first;
  }
  return std::nullopt;
}

Result<QueryParams> ParseQuery(std::string_view query, const QueryLimits& limits) {
  if (query.size() > limits.max_bytes) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "the query string is " + std::to_string(query.size()) +
                         " bytes, more than the " + std::to_string(limits.max_bytes) + " allowed");
  }
  std::vector<QueryParams::Pair> pairs;
  size_t pos = 0;
  while (pos <= query.size()) {
    size_t end = query.find('&', pos);
    if (end == std::string_view::npos) end = query.size();
    const std::string_view piece = query.substr(pos, end - pos);
    const size_t start = pos;
    pos = end + 1;
    if (piece.empty()) continue;
    const size_t eq = piece.find('=');
    const std::string_view raw_key = piece.substr(0, eq);
    if (raw_key.empty()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "the query parameter at byte " + std::to_string(start) +
                           " has an empty name (\"" + log::Escape(piece, 64) + "\")");
    }
    if (pairs.size() >= limits.max_params) {
      return MakeError(ErrorCode::kInvalidArgument, Name(raw_key, start) + ": more than " +
                                                        std::to_string(limits.max_params) +
                                                        " query parameters");
    }
    QueryParams::Pair pair;
    if (auto st = Decode(raw_key, start, raw_key, start, pair.first); !st) {
      return std::unexpected(st.error());
    }
    if (eq != std::string_view::npos) {
      if (auto st = Decode(piece.substr(eq + 1), start + eq + 1, raw_key, start, pair.second);
          !st) {
        return std::unexpected(st.error());
      }
    }
    pairs.push_back(std::move(pair));
  }
  return QueryParams(std::move(pairs));
}

std::string EncodeQueryComponent(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (Unreserved(c)) {
      out.push_back(static_cast<char>(c));
    } else if (c == ' ') {
      out.push_back('+');
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace edge::http
