// SameJson: two JSON values are the same document — the same types at every place (an
// unsigned 1, a signed 1 and a float 1.0 differ, which json's operator== does not tell),
// object keys in the same order, floats bit for bit (-0.0 and 0.0 differ). For the
// differential tests of the JSON reader against nlohmann::json::parse. Header only: the fuzz
// targets include it without linking the test-support library.
#pragma once

#include <cstddef>
#include <cstring>

#include <nlohmann/json.hpp>

namespace edge::testing {

inline bool SameJson(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(), jt = b.begin(); it != a.end(); ++it, ++jt) {
      if (it.key() != jt.key() || !SameJson(it.value(), jt.value())) return false;
    }
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!SameJson(a[i], b[i])) return false;
    }
    return true;
  }
  if (a.is_number_float()) {
    const double x = a.get<double>(), y = b.get<double>();
    return std::memcmp(&x, &y, sizeof x) == 0;
  }
  return a == b;
}

}  // namespace edge::testing
