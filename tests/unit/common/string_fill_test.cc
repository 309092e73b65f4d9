// ResizeAndOverwrite: the string ends at the size the callback returns, whatever the library
// passes it — at every size where a fresh or a grown string reallocates (libstdc++ 12 passes
// the grown capacity: 16 to 29 bytes asked of a fresh string gave 30).
#include "common/string_fill.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace edge {
namespace {

TEST(ResizeAndOverwriteTest, TheStringEndsWhereTheCallbackSays) {
  for (size_t n = 0; n <= 100; ++n) {
    std::string fresh;
    ResizeAndOverwrite(fresh, n, [&](char* p) {
      std::memset(p, 'x', n);
      return n;
    });
    ASSERT_EQ(fresh, std::string(n, 'x')) << n;
    // Kept bytes stay; a callback that stops early sets a shorter size.
    std::string grown = "head:";
    ResizeAndOverwrite(grown, 5 + n, [&](char* p) {
      std::memset(p + 5, 'y', n);
      return 5 + n / 2;
    });
    ASSERT_EQ(grown, "head:" + std::string(n / 2, 'y')) << n;
  }
}

}  // namespace
}  // namespace edge
