// ResizeAndOverwrite: std::string::resize_and_overwrite without its size argument, so a
// callback cannot return it. libstdc++ 12 (Debian bookworm's) passes the grown capacity there,
// not the size asked for, when the string reallocates (fixed in GCC 13): a callback that
// returned its argument left uninitialised bytes at the end (a fresh string asked for 16 to
// 29 bytes came back 30 long; stop 39 found two in base64). `write(char* p)` gets the
// string's buffer — its first s.size() bytes as they were, room for `n` in all — and returns
// the string's final size, at most `n` (fewer when it stops early, e.g. on bad input).
// Header-only; no state.
#pragma once

#include <cstddef>
#include <string>

namespace edge {

template <typename Write>
void ResizeAndOverwrite(std::string& s, size_t n, Write&& write) {
  s.resize_and_overwrite(n, [&](char* p, size_t) { return static_cast<size_t>(write(p)); });
}

}  // namespace edge
