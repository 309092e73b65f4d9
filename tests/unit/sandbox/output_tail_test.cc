// OutputTail against two independent definitions: hand-written cases, and, for many random
// chunkings of random bytes, (1) the tail of the whole stream as the header defines it and
// (2) the plain model the executor used before 1f4b939 (append every chunk, trim past twice
// the limit, trim at the end), which it must equal byte for byte, cut flag included.
#include "sandbox/output_tail.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace edge::sandbox {
namespace {

bool Continuation(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

size_t LongestContinuationRun(const std::string& s) {
  size_t longest = 0, run = 0;
  for (char c : s) {
    run = Continuation(c) ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return longest;
}

// The last `limit` bytes of `all`, moved on past at most three continuation bytes.
std::string TailOfWhole(const std::string& all, size_t limit) {
  if (limit == 0 || all.size() <= limit) return all;
  size_t start = all.size() - limit;
  for (int i = 0; i < 3 && start < all.size() && Continuation(all[start]); ++i)
    ++start;
  return all.substr(start);
}

// The executor's collection before 1f4b939: append, trim past 2 × limit, trim at the end.
struct AppendThenTrim {
  size_t limit;
  std::string kept;
  bool cut = false;
  void Trim() {
    if (limit == 0 || kept.size() <= limit) return;
    kept = TailOfWhole(kept, limit);
    cut = true;
  }
  void Add(const std::string& data) {
    kept += data;
    if (limit != 0 && kept.size() > 2 * limit) Trim();
  }
};

TEST(OutputTailTest, KeepsEverythingWithoutALimit) {
  OutputTail t;
  t.Add("hello ");
  t.Add(std::string(100000, 'x'));
  EXPECT_EQ(t.Finish(), "hello " + std::string(100000, 'x'));
  EXPECT_FALSE(t.cut());
}

TEST(OutputTailTest, KeepsTheLastBytesAndStartsOnACharacter) {
  OutputTail t(4);
  t.Add("abcdefghi");  // a chunk over twice the limit: only its tail is copied
  EXPECT_EQ(t.Finish(), "fghi");
  EXPECT_TRUE(t.cut());
  // "é" is C3 A9: a cut on A9 moves on to the next character; a cut on C3 keeps it whole.
  OutputTail u(2);
  u.Add("xy\xC3\xA9z");
  EXPECT_EQ(u.Finish(), "z");
  EXPECT_TRUE(u.cut());
  OutputTail u3(3);
  u3.Add("xy\xC3\xA9z");
  EXPECT_EQ(u3.Finish(), "\xC3\xA9z");
  EXPECT_TRUE(u3.cut());
  // The same through chunks smaller than the limit (trimmed once they pass twice the limit).
  OutputTail u4(2);
  for (const char* piece : {"x", "y", "\xC3", "\xA9", "z"})
    u4.Add(piece);
  EXPECT_EQ(u4.Finish(), "z");
  OutputTail v(3);
  v.Add("ab");
  EXPECT_EQ(v.Finish(), "ab");
  EXPECT_FALSE(v.cut()) << "under the limit nothing is cut";
  // Exactly the limit, in one chunk and in two: nothing cut.
  OutputTail w(3);
  w.Add("abc");
  EXPECT_EQ(w.Finish(), "abc");
  EXPECT_FALSE(w.cut());
  OutputTail x(3);
  x.Add("a");
  x.Add("bc");
  EXPECT_EQ(x.Finish(), "abc");
  EXPECT_FALSE(x.cut());
}

TEST(OutputTailTest, EqualsTheWholeStreamsTailAndThePlainModelForAnyChunking) {
  std::mt19937 rng(20261129);
  // ASCII, the bytes of é and €, and a stray continuation byte: cuts land inside characters
  // and inside runs of continuation bytes longer than three.
  const std::string alphabet = "ab\xC3\xA9\xE2\x82\xAC\x80";
  for (size_t limit : {1u, 2u, 3u, 4u, 5u, 7u, 16u}) {
    for (int round = 0; round < 3000; ++round) {
      OutputTail tail(limit);
      AppendThenTrim model{limit};
      std::string all;
      const int chunks = static_cast<int>(rng() % 6);
      for (int c = 0; c < chunks; ++c) {
        std::string chunk(rng() % (3 * limit + 3), 'a');
        for (auto& ch : chunk)
          ch = alphabet[rng() % alphabet.size()];
        tail.Add(chunk);
        model.Add(chunk);
        all += chunk;
      }
      model.Trim();
      const std::string got = tail.Finish();
      ASSERT_EQ(got, model.kept) << "limit " << limit << " round " << round;
      ASSERT_EQ(tail.cut(), model.cut) << "limit " << limit << " round " << round;
      ASSERT_LE(got.size(), limit);
      // Where no run of continuation bytes is longer than three (as in valid text), the result
      // is the tail of the whole stream, however it came in pieces — for a limit of at least
      // 4. (Under that, a trim can skip all the kept bytes, and the next chunk's first byte is
      // kept without being looked at: both this class and the model it replaces do so. The
      // executor's limits are 64 KiB and more.)
      if (limit >= 4 && LongestContinuationRun(all) <= 3) {
        ASSERT_EQ(got, TailOfWhole(all, limit)) << "limit " << limit << " round " << round;
      }
    }
  }
}

}  // namespace
}  // namespace edge::sandbox
