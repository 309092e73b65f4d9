// Constant-time comparison for secrets (tokens, MACs, hashes): the time taken depends
// only on the lengths, never on where the inputs differ.
#pragma once

#include <string_view>

namespace edge {

bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace edge
