// Vectors written by hand from RFC 3629 and Unicode 15 §3.9 (U+FFFD substitution of
// maximal subparts, Table 3-8), not produced by the code under test.
#include "common/utf8.h"

#include <gtest/gtest.h>

namespace edge {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8Test, ValidTextIsValid) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii\n\t"));
  EXPECT_TRUE(IsValidUtf8("\xC3\xA9"));          // é U+00E9
  EXPECT_TRUE(IsValidUtf8("\xE2\x82\xAC"));      // € U+20AC
  EXPECT_TRUE(IsValidUtf8("\xF0\x9F\x98\x80"));  // 😀 U+1F600
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));  // U+10FFFF, the last code point
  EXPECT_TRUE(IsValidUtf8(std::string("a\0b", 3)));
}

TEST(Utf8Test, IllFormedSequencesAreInvalid) {
  EXPECT_FALSE(IsValidUtf8("\xFF"));
  EXPECT_FALSE(IsValidUtf8("\x80"));              // lone continuation byte
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));      // overlong 3-byte
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // U+D800, a surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // U+110000, beyond the range
  EXPECT_FALSE(IsValidUtf8("\xE2\x82"));          // truncated €
  EXPECT_FALSE(IsValidUtf8("bad\377name"));
}

TEST(Utf8Test, ValidPrefixStopsAtTheFirstBadByte) {
  EXPECT_EQ(ValidUtf8Prefix("abc"), 3u);
  EXPECT_EQ(ValidUtf8Prefix("ab\xFF"
                            "c"),
            2u);
  EXPECT_EQ(ValidUtf8Prefix("\xC3\xA9\xE2\x82"), 2u);
}

TEST(Utf8Test, ValidPrefixFindsTheBadByteAtEveryPlaceInABlock) {
  // ASCII is skipped 16 bytes at a time, then 8: a bad byte at every offset of three blocks,
  // and a valid character across each block boundary.
  for (size_t at = 0; at < 48; ++at) {
    std::string s(48, 'a');
    s[at] = '\xFF';
    EXPECT_EQ(ValidUtf8Prefix(s), at);
    std::string t(48, 'a');
    t.replace(at, 3, "\xE2\x82\xAC");  // €, 3 bytes
    t.resize(48);
    EXPECT_EQ(ValidUtf8Prefix(t), at + 3 <= 48 ? 48u : at) << "at " << at;
  }
}

TEST(Utf8Test, ReplacementFollowsMaximalSubparts) {
  EXPECT_EQ(ToValidUtf8("abc"), "abc");
  EXPECT_EQ(ToValidUtf8("bad\377name"), "bad" + kFffd + "name");
  // Unicode Table 3-8: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64
  //   -> a FFFD FFFD FFFD b FFFD c FFFD FFFD d
  EXPECT_EQ(ToValidUtf8("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + kFffd + kFffd + kFffd + "b" + kFffd + "c" + kFffd + kFffd + "d");
  // A truncated character at the end is one replacement.
  EXPECT_EQ(ToValidUtf8("x\xE2\x82"), "x" + kFffd);
  // Surrogate: ED is a valid lead but A0 is outside its second-byte range: 3 replacements.
  EXPECT_EQ(ToValidUtf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);
  EXPECT_TRUE(IsValidUtf8(ToValidUtf8("\xC0\xAF\xF5\xFF")));
}

TEST(Utf8Test, TailStartMovesOnToTheNextCharacter) {
  const std::string s =
      "a\xE2\x82\xAC"
      "b";                              // a € b: bytes 0, 1-3, 4
  EXPECT_EQ(Utf8TailStart(s, 10), 0u);  // the whole text
  EXPECT_EQ(Utf8TailStart(s, 5), 0u);
  EXPECT_EQ(Utf8TailStart(s, 4), 1u);  // starts on the € itself
  EXPECT_EQ(Utf8TailStart(s, 3), 4u);  // inside the €: on to 'b'
  EXPECT_EQ(Utf8TailStart(s, 2), 4u);
  EXPECT_EQ(Utf8TailStart(s, 1), 4u);
  EXPECT_EQ(Utf8TailStart(s, 0), 5u);
  // At most three continuation bytes are skipped (invalid text: a longer run).
  EXPECT_EQ(Utf8TailStart("x\x80\x80\x80\x80\x80", 5), 4u);
  EXPECT_EQ(Utf8TailStart("\x80\x80", 1), 2u);  // nothing but continuation bytes: empty
  // A text that begins inside a character (cut out of a longer one) loses that part.
  EXPECT_EQ(Utf8TailStart("\x82\xAC"
                          "b",
                          3),
            2u);
}

TEST(Utf8Test, CutPointNeverSplitsACharacter) {
  const std::string s =
      "a\xE2\x82\xAC"
      "b";  // a € b
  EXPECT_EQ(Utf8CutPoint(s, 0), 0u);
  EXPECT_EQ(Utf8CutPoint(s, 1), 1u);
  EXPECT_EQ(Utf8CutPoint(s, 2), 1u);  // inside € -> before it
  EXPECT_EQ(Utf8CutPoint(s, 3), 1u);
  EXPECT_EQ(Utf8CutPoint(s, 4), 4u);
  EXPECT_EQ(Utf8CutPoint(s, 99), s.size());
}

TEST(Utf8Test, SequenceLengthNamesEachWellFormedForm) {
  EXPECT_EQ(Utf8SequenceLength("a", 0), 1u);
  EXPECT_EQ(Utf8SequenceLength("\xc3\xa9", 0), 2u);
  EXPECT_EQ(Utf8SequenceLength("\xe2\x82\xac", 0), 3u);
  EXPECT_EQ(Utf8SequenceLength("\xf0\x9f\x98\x80", 0), 4u);
  EXPECT_EQ(Utf8SequenceLength("x\xf0\x9f\x98\x80", 1), 4u);
  EXPECT_EQ(Utf8SequenceLength("\xa9", 0), 0u);              // a continuation byte alone
  EXPECT_EQ(Utf8SequenceLength("\xc0\xaf", 0), 0u);          // overlong
  EXPECT_EQ(Utf8SequenceLength("\xed\xa0\x80", 0), 0u);      // a surrogate
  EXPECT_EQ(Utf8SequenceLength("\xf4\x90\x80\x80", 0), 0u);  // beyond U+10FFFF
  EXPECT_EQ(Utf8SequenceLength("\xe2\x82", 0), 0u);          // cut off
}

TEST(Utf8Test, ValidPrefixFindsABadByteAtEveryOffsetOfAnAsciiRun) {
  // The ASCII runs are checked eight bytes at a time: a bad byte is found wherever it sits.
  for (size_t at = 0; at < 40; ++at) {
    std::string s(40, 'a');
    s[at] = '\xff';
    EXPECT_EQ(ValidUtf8Prefix(s), at) << at;
    EXPECT_FALSE(IsValidUtf8(s)) << at;
  }
  EXPECT_TRUE(IsValidUtf8(std::string(41, 'a') + "\xc3\xa9" + std::string(9, 'b')));
}

TEST(Utf8IncompleteTail, CountsTheStartOfACharacterTheEndCutsOff) {
  // Hand-written: é = C3 A9, € = E2 82 AC, 😀 = F0 9F 98 80.
  EXPECT_EQ(Utf8IncompleteTail(""), 0u);
  EXPECT_EQ(Utf8IncompleteTail("abc"), 0u);
  EXPECT_EQ(Utf8IncompleteTail("caf\xc3\xa9"), 0u);       // whole
  EXPECT_EQ(Utf8IncompleteTail("caf\xc3"), 1u);           // é cut after its lead
  EXPECT_EQ(Utf8IncompleteTail("\xc3"), 1u);              // nothing but the lead
  EXPECT_EQ(Utf8IncompleteTail("x\xe2"), 1u);             // € cut after 1 of 3
  EXPECT_EQ(Utf8IncompleteTail("x\xe2\x82"), 2u);         // after 2 of 3
  EXPECT_EQ(Utf8IncompleteTail("x\xe2\x82\xac"), 0u);     // whole
  EXPECT_EQ(Utf8IncompleteTail("x\xf0\x9f\x98"), 3u);     // 😀 after 3 of 4
  EXPECT_EQ(Utf8IncompleteTail("\xf0\x9f\x98\x80"), 0u);  // whole
  // Bytes no continuation makes a character: nothing to hold back.
  EXPECT_EQ(Utf8IncompleteTail("x\xff"), 0u);
  EXPECT_EQ(Utf8IncompleteTail("x\xc0"), 0u);  // overlong lead
  EXPECT_EQ(Utf8IncompleteTail("x\xf5"), 0u);  // past U+10FFFF
  EXPECT_EQ(Utf8IncompleteTail("x\x80"), 0u);  // a stray continuation byte
  EXPECT_EQ(Utf8IncompleteTail("\x80\x80\x80"), 0u);
  EXPECT_EQ(Utf8IncompleteTail("\xc3\xa9\xa9"), 0u);  // a continuation too many
}

}  // namespace
}  // namespace edge
