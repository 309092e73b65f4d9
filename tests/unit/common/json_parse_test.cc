#include "common/json_parse.h"
#include "common/utf8.h"
#include "tests/support/same_json.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace edge {
namespace {

using edge::testing::SameJson;

std::string Nested(size_t depth, char open = '[', char close = ']') {
  return std::string(depth, open) + std::string(depth, close);
}

TEST(JsonParse, ParsesOrdinaryDocuments) {
  auto j = ParseJsonBounded(R"({"a":[1,2,{"b":"c"}],"d":true})", "args");
  ASSERT_TRUE(j) << j.error().ToString();
  EXPECT_EQ((*j)["a"][2]["b"], "c");
  EXPECT_TRUE(ParseJsonBounded("42", "x"));
  EXPECT_TRUE(ParseJsonBounded(R"("str")", "x"));
}

TEST(JsonParse, DepthAtTheLimitIsAcceptedOneMoreIsRefused) {
  EXPECT_TRUE(ParseJsonBounded(Nested(64), "args_json"));
  EXPECT_TRUE(ParseJsonBounded(Nested(3), "args_json", 3));
  auto deep = ParseJsonBounded(Nested(65), "args_json");
  ASSERT_FALSE(deep);
  EXPECT_EQ(deep.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(deep.error().message,
            "args_json is nested 65 levels deep at byte 64, deeper than the limit of 64 nested "
            "arrays/objects");
  auto objects = ParseJsonBounded(R"({"a":{"b":{"c":{}}}})", "delta", 3);
  ASSERT_FALSE(objects);
  EXPECT_NE(objects.error().message.find("delta is nested 4 levels deep at byte 15"),
            std::string::npos)
      << objects.error().message;
}

TEST(JsonParse, OneHundredThousandLevelsAreRefusedWithoutRecursion) {
  // The finding: 100 000 levels overflowed the stack in a recursive dump.
  const std::string text = Nested(100'000);
  auto r = ParseJsonBounded(text, "args_json");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("limit of 64"), std::string::npos);
  // Unbalanced (never closed) is measured the same way.
  EXPECT_FALSE(CheckJsonDepth(std::string(100'000, '{'), "x"));
}

TEST(JsonParse, ATextBothMalformedAndTooDeepIsRefusedAsTooDeep) {
  // `{{` is malformed at byte 2 (a key must be a string) and 65 levels deep at byte 64.
  auto r = ParseJsonBounded(std::string(100, '{'), "args");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "args is nested 65 levels deep at byte 64, deeper than the limit of 64 nested "
            "arrays/objects");
  // Malformed and within the limit: the syntax error.
  auto shallow = ParseJsonBounded(std::string(3, '{'), "args");
  ASSERT_FALSE(shallow);
  EXPECT_NE(shallow.error().message.find("args is not valid JSON: at byte 2: "), std::string::npos)
      << shallow.error().message;
}

TEST(JsonParse, BracketsInsideStringsDoNotCountAndEscapesAreHonoured) {
  const std::string in_string = "[\"" + std::string(500, '[') + "\"]";
  auto r = ParseJsonBounded(in_string, "args");
  ASSERT_TRUE(r) << r.error().ToString();
  EXPECT_EQ((*r)[0].get<std::string>().size(), 500u);
  // An escaped quote does not end the string: the brackets after it are still inside.
  const std::string escaped_quote = R"(["\")" + std::string(100, '{') + R"("])";
  EXPECT_TRUE(CheckJsonDepth(escaped_quote, "x"));
  // An escaped backslash does end before the quote: the brackets after it count.
  const std::string escaped_backslash =
      R"(["\\",)" + std::string(70, '[') + std::string(70, ']') + "]";
  auto deep = CheckJsonDepth(escaped_backslash, "x");
  ASSERT_FALSE(deep);
  EXPECT_NE(deep.error().message.find("65 levels"), std::string::npos) << deep.error().message;
}

TEST(JsonParse, ParseErrorsNameWhatAndTheBytePosition) {
  auto r = ParseJsonBounded(R"({"a": tru})", "args_json");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("args_json is not valid JSON: at byte 10: "), std::string::npos)
      << r.error().message;
  EXPECT_NE(r.error().message.find("syntax error"), std::string::npos) << r.error().message;
  auto empty = ParseJsonBounded("", "payload");
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().message.find("payload is not valid JSON: at byte 1"), std::string::npos)
      << empty.error().message;
  auto bad_utf8 = ParseJsonBounded("[\"\xff\"]", "args");
  ASSERT_FALSE(bad_utf8);
  EXPECT_NE(bad_utf8.error().message.find("args is not valid JSON"), std::string::npos);
  EXPECT_FALSE(ParseJsonBounded("[1] trailing", "x"));
}

TEST(AppendJsonString, EscapesExactlyAsNlohmannDumps) {
  // Every byte that needs care, valid multi-byte UTF-8 (2, 3 and 4 bytes), DEL, and long
  // runs; the oracle is nlohmann::json::dump, another implementation.
  std::vector<std::string> cases = {"",
                                    "plain",
                                    "quote\" back\\ slash",
                                    std::string("\0\x01\x1f\x7f", 4),
                                    "\b\f\n\r\t",
                                    "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
                                    std::string(100000, 'x') + "\n" + std::string(3, '"')};
  std::string all;
  for (int c = 0; c < 0x80; ++c)
    all.push_back(static_cast<char>(c));
  cases.push_back(all);
  for (const auto& s : cases) {
    std::string out = "prefix:";
    AppendJsonString(out, s);
    EXPECT_EQ(out, "prefix:" + nlohmann::json(s).dump()) << nlohmann::json(s).dump();
  }
  std::string out;
  AppendJsonString(out, "\x01");
  EXPECT_EQ(out, "\"\\u0001\"");  // by hand: lowercase hex, four digits
}

TEST(AppendJsonString, EveryByteThatNeedsCareIsFoundAtEveryPlaceInABlock) {
  // The writer and the reader scan 16 bytes at a time (common/byte_scan.h), then 8, then one:
  // each byte that needs care, at every offset of strings up to three blocks long, alone and
  // beside others, must come out as nlohmann writes it and read back as it went in.
  const std::vector<std::string> marks = {"\"",   "\\",   "\n",   "\t",       std::string(1, '\0'),
                                          "\x01", "\x1f", "\x7f", "\xc3\xa9", "\xe2\x82\xac"};
  for (const auto& mark : marks) {
    for (size_t len = 0; len <= 48; ++len) {
      for (size_t at = 0; at <= len; ++at) {
        std::string s(len, 'a');
        s.insert(at, mark);
        if (at + 17 <= s.size()) s.insert(at + 17, mark);  // a second one a block later
        std::string out = "[";
        AppendJsonString(out, s);
        out += "]";
        const std::string want = "[" + nlohmann::json(s).dump() + "]";
        ASSERT_EQ(out, want) << "mark " << nlohmann::json(mark).dump() << " at " << at;
        auto back = ParseJsonBounded(out, "x");
        ASSERT_TRUE(back) << back.error().message;
        ASSERT_EQ((*back)[0].get<std::string>(), s) << "at " << at;
      }
    }
  }
  // A block made only of such bytes, and one of each kind in a row.
  std::string dense;
  for (int c = 0; c < 0x20; ++c)
    dense += std::string(1, static_cast<char>(c)) + "\"\\";
  std::string out;
  AppendJsonString(out, dense);
  EXPECT_EQ(out, nlohmann::json(dense).dump());
}

TEST(JsonStringSize, MeasuresWhatAppendJsonStringWritesForValidUtf8) {
  // A character of 2, 3 or 4 bytes (and a byte to escape) at every offset of strings up to
  // three blocks long: across every block boundary, alone, doubled, and beside an escape.
  const std::vector<std::string> marks = {
      "\xc3\xa9",         "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf",
      "\xc3\xa9\xc3\xa9", "\xc3\xa9\n",   "\n\xe2\x82\xac",   "\""};
  for (const auto& mark : marks) {
    for (size_t len = 0; len <= 40; ++len) {
      for (size_t at = 0; at <= len; ++at) {
        std::string s(len, 'a');
        s.insert(at, mark);
        const std::string want = "<" + nlohmann::json(s).dump();
        const auto sized = JsonStringSize(s);
        ASSERT_TRUE(sized) << nlohmann::json(s).dump();
        EXPECT_EQ(sized->bytes(), want.size() - 1) << nlohmann::json(s).dump();
        std::string out = "<";
        AppendJsonString(out, *sized);
        ASSERT_EQ(out, want);
      }
    }
  }
}

TEST(JsonStringSize, RefusesInvalidUtf8AtEveryPlaceInABlock) {
  // Each kind of ill-formed UTF-8 (hand-written: a byte never used, a stray continuation
  // byte, overlong forms, a surrogate, past U+10FFFF, a sequence cut off by the end), at
  // every offset, alone and right after a valid character in the same block: refused exactly
  // when IsValidUtf8 (tested with its own vectors) refuses the whole string.
  const std::vector<std::string> bad = {"\xff",         "\x80",         "\xc0\xaf",
                                        "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                        "\xc3",         "\xe2\x82",     "\xf0\x9f\x98"};
  for (const auto& b : bad) {
    for (const std::string before : {"", "\xc3\xa9", "\xe2\x82\xac"}) {
      for (size_t at = 0; at <= 40; ++at) {
        std::string s(40, 'z');
        s.insert(at, before + b);
        ASSERT_FALSE(IsValidUtf8(s));
        EXPECT_FALSE(JsonStringSize(s))
            << "bad "
            << nlohmann::json(b).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
            << " at " << at;
        // At the very end, where the scan goes a byte at a time.
        EXPECT_FALSE(JsonStringSize(std::string(at, 'y') + before + b)) << "at the end, " << at;
      }
    }
  }
}

TEST(JsonParse, AByteThatMustBeRefusedIsFoundAtEveryPlaceInABlock) {
  // A raw control character or invalid UTF-8 inside a string, at every offset: the reader
  // names the byte where it is (counted from 1), however the scan's blocks fall.
  for (const char bad : {'\x01', '\x1f', '\xff'}) {
    for (size_t at = 0; at < 40; ++at) {
      std::string text = "[\"" + std::string(40, 'b') + "\"]";
      text[2 + at] = bad;
      auto r = ParseJsonBounded(text, "x");
      ASSERT_FALSE(r) << "at " << at;
      EXPECT_NE(r.error().message.find("at byte " + std::to_string(3 + at) + ":"),
                std::string::npos)
          << r.error().message;
    }
  }
}

// The values are written by hand from RFC 8259 and nlohmann's documented number rules, not
// produced by a parser.
TEST(JsonParse, BuildsTheValuesTheTextSays) {
  using json = nlohmann::json;
  struct Case {
    std::string text;
    json want;
  };
  const std::vector<Case> cases = {
      {"0", json(uint64_t{0})},
      {"-0", json(int64_t{0})},
      {"18446744073709551615", json(std::numeric_limits<uint64_t>::max())},
      {"-9223372036854775808", json(std::numeric_limits<int64_t>::min())},
      {"18446744073709551616", json(18446744073709551616.0)},
      {"-9223372036854775809", json(-9223372036854775809.0)},
      {"1E2", json(100.0)},
      {"-1.5e-3", json(-0.0015)},
      {"1e-400", json(0.0)},
      {" \t\r\n[ true , false , null ] ", json::array({true, false, nullptr})},
      {R"("\u00e9\u20AC\ud83d\ude00")", json("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80")},
      {R"("\"\\\/\b\f\n\r\t")", json("\"\\/\b\f\n\r\t")},
      {R"("a\u0000b")", json(std::string("a\0b", 3))},
      {"\"caf\xc3\xa9\"", json("caf\xc3\xa9")},
      {R"({"k":1,"k":2})", json{{"k", 2}}},  // the last value of a repeated key wins
      {R"({"":{}})", json{{"", json::object()}}},
      {"\xEF\xBB\xBF[1]", json::array({1})},  // a byte order mark is skipped
  };
  for (const auto& c : cases) {
    auto got = ParseJsonBounded(c.text, "x");
    ASSERT_TRUE(got) << c.text << ": " << got.error().ToString();
    EXPECT_EQ(*got, c.want) << c.text;
    EXPECT_EQ(got->type(), c.want.type()) << c.text;
    EXPECT_EQ(got->dump(), c.want.dump()) << c.text;
  }
  // A long string with a quote, a backslash and multi-byte characters near the 8-byte steps.
  std::string body(1000, 'x');
  body[517] = '\xc3';
  body[518] = '\xa9';
  auto long_text = ParseJsonBounded("[\"" + body + "\\\"\\\\" + body + "\"]", "x");
  ASSERT_TRUE(long_text) << long_text.error().ToString();
  EXPECT_EQ((*long_text)[0].get<std::string>(), body + "\"\\" + body);
}

TEST(JsonParse, RefusesWhatRfc8259RefusesNamingTheByte) {
  struct Case {
    std::string text;
    size_t byte;  // counted from 1
    std::string why;
  };
  const std::vector<Case> cases = {
      {"01", 2, "expected end of input"},
      {"1.", 3, "after '.'"},
      {".5", 1, "unexpected '.'"},
      {"+1", 1, "unexpected '+'"},
      {"-", 2, "after '-'"},
      {"1e", 3, "exponent"},
      {"[1,]", 4, "unexpected ']'"},
      {R"({"a":1,})", 8, "expected an object key"},
      {"{'a':1}", 2, "expected an object key"},
      {R"({"a" 1})", 6, "expected ':'"},
      {"{1:2}", 2, "expected an object key"},
      {"[1 2]", 4, "expected ',' or ']'"},
      {"[1", 3, "unexpected end of input"},
      {R"("\x")", 3, "invalid escape"},
      {"\"a\tb\"", 3, "control character byte 0x09"},
      {R"("\ud800")", 2, "high surrogate"},
      {R"("\ud800\u0041")", 2, "high surrogate"},
      {R"("\udc00")", 2, "low surrogate"},
      {R"("\u12g4")", 6, "4 hex digits"},
      {"\"\xc0\xaf\"", 2, "invalid UTF-8 byte 0xC0"},      // overlong '/'
      {"\"\xed\xa0\x80\"", 2, "invalid UTF-8 byte 0xED"},  // a surrogate in UTF-8
      {"\"\xf4\x90\x80\x80\"", 2, "invalid UTF-8"},        // beyond U+10FFFF
      {"\"abc", 5, "no closing quote"},
      {"nul", 4, "expected 'null'"},
      {"1e400", 1, "number overflow"},
      {std::string("[1]\0", 4), 4, "byte 0x00 after the value"},
  };
  for (const auto& c : cases) {
    auto got = ParseJsonBounded(c.text, "body");
    ASSERT_FALSE(got) << c.text;
    EXPECT_EQ(got.error().code, ErrorCode::kInvalidArgument);
    const std::string& m = got.error().message;
    EXPECT_NE(m.find("body is not valid JSON: at byte " + std::to_string(c.byte) + ": "),
              std::string::npos)
        << c.text << " -> " << m;
    EXPECT_NE(m.find(c.why), std::string::npos) << c.text << " -> " << m;
  }
}

std::string RandomDocument(std::mt19937& rng, int depth) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  static const std::vector<std::string> kAtoms = {"0",
                                                  "-0",
                                                  "1",
                                                  "-1",
                                                  "12.5e3",
                                                  "1E-2",
                                                  "-0.0",
                                                  "9223372036854775807",
                                                  "9223372036854775808",
                                                  "-9223372036854775808",
                                                  "-9223372036854775809",
                                                  "18446744073709551615",
                                                  "18446744073709551616",
                                                  "1e308",
                                                  "1e-320",
                                                  "0.1",
                                                  "true",
                                                  "false",
                                                  "null",
                                                  "\"\"",
                                                  "\"plain\"",
                                                  "\"esc \\\" \\\\ \\/ \\n \\u00e9\"",
                                                  "\"\\ud83d\\ude00\"",
                                                  "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"",
                                                  "\"\\u0000\""};
  const int kind = depth > 4 ? pick(2) : pick(4);
  if (kind <= 1) return kAtoms[static_cast<size_t>(pick(static_cast<int>(kAtoms.size())))];
  const char* ws[] = {"", " ", "\n\t", "\r\n "};
  std::string out(1, kind == 2 ? '[' : '{');
  const int n = pick(4);
  for (int i = 0; i < n; ++i) {
    if (i > 0) out += ",";
    out += ws[pick(4)];
    if (kind == 3) out += "\"k" + std::to_string(pick(3)) + "\"" + ws[pick(4)] + ":";
    out += RandomDocument(rng, depth + 1) + ws[pick(4)];
  }
  out += kind == 2 ? ']' : '}';
  return out;
}

// Random texts, each either a valid document or one mutated byte away from one: the reader
// accepts exactly what nlohmann::json::parse (another implementation) accepts, and builds the
// same value with the same number types; the one difference by design is a NUL byte after
// the value, where nlohmann stops reading and ours refuses.
TEST(JsonParse, AcceptsAndBuildsExactlyWhatNlohmannDoes) {
  std::mt19937 rng(20261128);
  std::string kBytes = "{}[]\",:\\ \t\n0123456789-+.eEtrufalsn\"\xc3\xa9\xff\x01";
  kBytes.push_back('\0');
  int accepted = 0, refused = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string text = RandomDocument(rng, 0);
    const int mutations = static_cast<int>(rng() % 3);  // 0: valid as generated
    for (int m = 0; m < mutations && !text.empty(); ++m) {
      const size_t at = rng() % text.size();
      const char b = kBytes[rng() % kBytes.size()];
      switch (rng() % 3) {
        case 0:
          text[at] = b;
          break;
        case 1:
          text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), b);
          break;
        default:
          text.erase(at, 1);
      }
    }
    nlohmann::json want;
    bool ok = true;
    try {
      want = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception&) {
      ok = false;
    }
    auto got = ParseJsonBounded(text, "x");
    // In place, taking every member string it may (from 0 bytes) or only some (from 3): the
    // same answer, error messages included.
    for (size_t take_min : {size_t{0}, size_t{3}}) {
      std::string owned = text;
      auto in_place = ParseJsonBoundedInPlace(owned, "x", kDefaultJsonMaxDepth, take_min);
      ASSERT_EQ(in_place.has_value(), got.has_value()) << text;
      if (got) {
        ASSERT_TRUE(SameJson(*in_place, *got)) << text << " take_min " << take_min;
      } else {
        ASSERT_EQ(in_place.error().message, got.error().message) << text;
        ASSERT_EQ(owned, text) << "a refusal leaves the text as it was";
      }
    }
    if (!got && ok && text.find('\0') != std::string::npos) {
      // The one difference by design: nlohmann ends the text at a NUL after the value.
      EXPECT_NE(got.error().message.find("byte 0x00"), std::string::npos) << got.error().message;
      ++refused;
      continue;
    }
    ASSERT_EQ(got.has_value(), ok) << text << (got ? "" : " -> " + got.error().message);
    if (ok) {
      ASSERT_TRUE(SameJson(*got, want))
          << text << "\nours:     " << got->dump() << "\nnlohmann: " << want.dump();
      ++accepted;
    } else {
      ++refused;
    }
  }
  // Both kinds were exercised in earnest.
  EXPECT_GT(accepted, 5000);
  EXPECT_GT(refused, 5000);
}

// ParseJsonBoundedInPlace: file_write's request, with a 9 MiB content, gives the value
// ParseJsonBounded gives, and that content is the text's own buffer, not a copy.
TEST(JsonParse, InPlaceTakesTheLargeStringsBuffer) {
  const std::string content(9 << 20, 'A');
  std::string text = R"({"id":"b","method":"worker.file_write","params":{"path":"big.bin",)"
                     R"("content":")" +
                     content + R"(","mode":"0600"}})";
  const std::string copy = text;
  const char* const buffer = text.data();
  auto want = ParseJsonBounded(copy, "request body");
  ASSERT_TRUE(want.has_value());
  auto got = ParseJsonBoundedInPlace(text, "request body");
  ASSERT_TRUE(got.has_value()) << got.error().message;
  EXPECT_TRUE(SameJson(*got, *want));
  const auto& taken = got->at("params").at("content").get_ref<const std::string&>();
  EXPECT_EQ(taken.data(), buffer);
  EXPECT_TRUE(taken == content);
  EXPECT_TRUE(text.empty());
  // Below the threshold nothing is taken, and the text is as it was.
  std::string small = R"({"content":"QUJD"})";
  auto kept = ParseJsonBoundedInPlace(small, "x");
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->at("content"), "QUJD");
  EXPECT_EQ(small, R"({"content":"QUJD"})");
}

// The cases where a taken string's slot changes under it, or it must not be taken at all:
// the same values as ParseJsonBounded, with every string a candidate (take_min 0).
TEST(JsonParse, InPlaceGivesTheSameValuesWhereTakingIsSubtle) {
  const std::vector<std::string> texts = {
      R"({"p":{"c":"big"},"p":{"c":""}})",  // the taken string's parent replaced: ""
      R"({"p":{"c":"big"},"x":1,"x":2})",   // another key repeated: "big" stays
      R"({"a":"x","a":"y"})",               // the taken string itself replaced
      R"({"a":"x","b":"y"})",               // only the first is taken
      R"(["big",{"a":["c"]}])",             // array elements are never taken
      R"("big")",                           // nor the root
      R"({"c":"a\nb","d":"e"})",            // nor a string with an escape
      R"({"c":"caf\u00e9"})",
      "{\"c\":\"caf\xc3\xa9\",\"c\":\"x\",\"d\":{\"e\":\"f\"}}",
      "\xEF\xBB\xBF{\"c\":\"bom\"}",  // after a byte order mark
  };
  for (const std::string& text : texts) {
    auto want = ParseJsonBounded(text, "x");
    ASSERT_TRUE(want.has_value()) << text;
    std::string owned = text;
    auto got = ParseJsonBoundedInPlace(owned, "x", kDefaultJsonMaxDepth, 0);
    ASSERT_TRUE(got.has_value()) << text;
    EXPECT_TRUE(SameJson(*got, *want))
        << text << "\nin place: " << got->dump() << "\nexpected: " << want->dump();
  }
  // Refused after a string that would be taken: the same error, the text untouched.
  for (const std::string& text : {std::string(R"({"c":"big",})"), std::string(R"({"c":"big"} x)"),
                                  Nested(65, '[', ']') + R"({"c":"big")"}) {
    std::string owned = text;
    auto got = ParseJsonBoundedInPlace(owned, "x", kDefaultJsonMaxDepth, 0);
    auto want = ParseJsonBounded(text, "x");
    ASSERT_FALSE(got.has_value()) << text;
    EXPECT_EQ(got.error().message, want.error().message);
    EXPECT_EQ(owned, text);
  }
}

TEST(DumpJson, WritesWhatNlohmannDumpsWithReplace) {
  using json = nlohmann::json;
  std::string all;
  for (int c = 0; c < 256; ++c)
    all.push_back(static_cast<char>(c));
  const std::vector<json> docs = {
      json(nullptr),
      json(true),
      json(-3),
      json(uint64_t{18446744073709551615u}),
      json(0.1),
      json(5.0),
      json(-0.0),
      json::object(),
      json::array(),
      json{{"b", 1}, {"a", {1, "two", nullptr, json::object()}}, {"quote\"key", "v"}},
      json(std::string(100000, 'x') + "\n\"\\" + std::string(13, 'y')),
      json("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
      json(all),                       // invalid UTF-8: nlohmann's replacement, exactly
      json{{"bad\xff key", "\xc0"}}};  // in keys too
  for (const auto& d : docs) {
    EXPECT_EQ(DumpJson(d), d.dump(-1, ' ', false, json::error_handler_t::replace))
        << d.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  EXPECT_EQ(DumpJson(json{{"a", "\x01"}}), "{\"a\":\"\\u0001\"}");  // by hand
}

// DumpJsonPieces: DumpJson's text in pieces. A string value of at least the threshold that is
// written as it is becomes a piece of its own, moved out of the value; one that needs an
// escape, is not valid UTF-8, is shorter, or is a key stays in the text. Expected pieces by
// hand, with a threshold of 4.
TEST(DumpJsonPieces, TakesLongStringsWrittenAsTheyAreAndNothingElse) {
  using json = nlohmann::json;
  using Pieces = std::vector<std::string>;
  struct Case {
    json doc;
    Pieces want;
  };
  const std::vector<Case> cases = {
      {json(nullptr), {"null"}},
      {json("abc"), {"\"abc\""}},            // shorter than 4
      {json("abcd"), {"\"", "abcd", "\""}},  // a whole document that is one string
      {json{{"content", "QUJDRA=="}, {"path", "a"}},
       {"{\"content\":\"", "QUJDRA==", "\",\"path\":\"a\"}"}},
      {json{{"a", "x\"yz1"}}, {"{\"a\":\"x\\\"yz1\"}"}},  // needs an escape: stays
      {json{{"a", "\xff\xfe\xfd\xfc"}}, {}},              // not UTF-8: stays, as DumpJson writes it
      {json{{"long key", 1}}, {"{\"long key\":1}"}},      // a key is never taken
      {json{{"r", {{"x", json::array({"wxyz", 2, "stuv"})}}}},
       {"{\"r\":{\"x\":[\"", "wxyz", "\",2,\"", "stuv", "\"]}}"}},
  };
  for (const auto& c : cases) {
    json doc = c.doc;
    const std::string whole = DumpJson(doc);
    auto pieces = DumpJsonPieces(std::move(doc), 4);
    EXPECT_EQ(pieces, c.want.empty() ? Pieces{whole} : c.want) << whole;
    std::string joined;
    for (const auto& p : pieces)
      joined += p;
    EXPECT_EQ(joined, whole);
  }
  // The taken string is moved, not copied: its buffer is the piece's, and the value is empty.
  json doc = {{"id", "1"}, {"content", std::string(1 << 20, 'Q')}};
  const char* buffer = doc["content"].get_ref<const std::string&>().data();
  auto pieces = DumpJsonPieces(std::move(doc), 1 << 20);
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0], "{\"content\":\"");
  EXPECT_EQ(pieces[1].data(), buffer);
  EXPECT_EQ(pieces[2], "\",\"id\":\"1\"}");
  EXPECT_EQ(doc["content"], "");  // NOLINT(bugprone-use-after-move): left empty, as documented
  // By default only strings of 8 MiB or more are taken.
  EXPECT_EQ(DumpJsonPieces(json{{"content", std::string(1 << 20, 'Q')}}).size(), 1u);
}

}  // namespace
}  // namespace edge
