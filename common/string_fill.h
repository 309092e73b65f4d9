// ResizeAndOverwrite: std::string::resize_and_overwrite without its size argument, so a
// callback cannot return it. libstdc++ 12 (Debian bookworm's) passes the grown capacity there,
// not the size asked for, when the string reallocates (fixed in GCC 13): a callback that
// returned its argument left uninitialised bytes at the end (a fresh string asked for 16 to
// 29 bytes came back 30 long; stop 39 found two in base64). `write(char* p)` gets the
// string's buffer — its first s.size() bytes as they were, room for `n` in all — and returns
// the string's final size as a size_t, at most `n` (fewer when it stops early, e.g. on bad
// input; more aborts: those bytes were never written). The only caller of
// resize_and_overwrite in the tree (a lint test keeps it so). A buffer of 8 MiB or more is
// reserved first and advised huge pages before it is written (common/huge_pages.h). No state.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "common/huge_pages.h"

namespace edge {

template <typename Write>
void ResizeAndOverwrite(std::string& s, size_t n, Write&& write) {
  static_assert(std::is_same_v<std::invoke_result_t<Write&, char*>, size_t>,
                "the callback returns the string's final size as a size_t");
  if (n >= kHugePageAdviceMinBytes) ReserveLarge(s, n);
  s.resize_and_overwrite(n, [&](char* p, size_t) {
    const size_t size = write(p);
    // More than asked for would keep bytes nobody wrote, as the library's bug did.
    if (size > n) std::abort();
    return size;
  });
}

// `s` resized to `n` bytes, those past its old size left as they happen to be, for a caller
// that writes every one of them itself (a read into place) before anything reads them: no
// zero-filling pass over hundreds of MB first. Huge pages from 8 MiB on, as above.
inline void ResizeUninitialized(std::string& s, size_t n) {
  ResizeAndOverwrite(s, n, [n](char*) { return n; });
}

}  // namespace edge
