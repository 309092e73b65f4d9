// http/query.h: SplitTarget, ParseQuery (decoding, '+', empty values, duplicates kept in
// order, QueryParams helpers) and bad input — bad percent-escapes, empty names, NUL bytes and
// the count/length caps — each refused with a message naming the parameter and the offset.
// Plus Request::Path/Query built on SplitTarget, and EncodeQueryComponent round trips.
#include <gtest/gtest.h>

#include "http/message.h"
#include "http/query.h"

namespace edge::http {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

Pairs Parse(std::string_view q) {
  auto r = ParseQuery(q);
  EXPECT_TRUE(r) << q << ": " << r.error().message;
  return r ? r->pairs() : Pairs{};
}

std::string ParseError(std::string_view q, const QueryLimits& limits = {}) {
  auto r = ParseQuery(q, limits);
  if (r) {
    ADD_FAILURE() << "accepted: " << q;
    return "";
  }
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument) << q;
  return r.error().message;
}

TEST(SplitTargetTest, CutsAtTheQueryAndDropsAFragment) {
  auto t = SplitTarget("/v1/edge/ws/stream?ticket=a&session_id=b");
  EXPECT_EQ(t.path, "/v1/edge/ws/stream");
  EXPECT_EQ(t.query, "ticket=a&session_id=b");
  EXPECT_TRUE(t.has_query);

  t = SplitTarget("/a");
  EXPECT_EQ(t.path, "/a");
  EXPECT_EQ(t.query, "");
  EXPECT_FALSE(t.has_query);

  t = SplitTarget("/a?");
  EXPECT_EQ(t.path, "/a");
  EXPECT_EQ(t.query, "");
  EXPECT_TRUE(t.has_query);

  t = SplitTarget("/a?x=1#frag?y=2");
  EXPECT_EQ(t.path, "/a");
  EXPECT_EQ(t.query, "x=1");

  t = SplitTarget("/a#frag?x=1");  // the '?' is in the fragment
  EXPECT_EQ(t.path, "/a");
  EXPECT_FALSE(t.has_query);

  t = SplitTarget("/a?b?c=d");  // only the first '?' separates
  EXPECT_EQ(t.query, "b?c=d");

  t = SplitTarget("");
  EXPECT_EQ(t.path, "");
  EXPECT_FALSE(t.has_query);
}

TEST(SplitTargetTest, RequestPathAndQueryUseIt) {
  Request r{.method = "GET", .target = "/v1/edge/nodes/n1/metrics?period=week"};
  EXPECT_EQ(r.Path(), "/v1/edge/nodes/n1/metrics");
  EXPECT_EQ(r.Query(), "period=week");
  r.target = "/v1/edge/nodes";
  EXPECT_EQ(r.Path(), "/v1/edge/nodes");
  EXPECT_EQ(r.Query(), "");
}

TEST(ParseQueryTest, DecodesPairsInOrder) {
  EXPECT_EQ(Parse(""), Pairs{});
  EXPECT_EQ(Parse("a=1"), (Pairs{{"a", "1"}}));
  EXPECT_EQ(Parse("ticket=AbC-_9&session_id=5f0c&last_seq=42"),
            (Pairs{{"ticket", "AbC-_9"}, {"session_id", "5f0c"}, {"last_seq", "42"}}));
  // '+' is a space, %XX a byte (either case), in keys and values; %2B is a real '+'.
  EXPECT_EQ(Parse("q=a+b%20c%2Bd&k%65y=%e2%82%AC"), (Pairs{{"q", "a b c+d"}, {"key", "€"}}));
  // Only the first '=' splits; later ones belong to the value.
  EXPECT_EQ(Parse("a==b=c"), (Pairs{{"a", "=b=c"}}));
  // Encoded '&' and '=' do not split.
  EXPECT_EQ(Parse("a%26b=c%3Dd"), (Pairs{{"a&b", "c=d"}}));
}

TEST(ParseQueryTest, EmptyValuesAndEmptyPieces) {
  EXPECT_EQ(Parse("flag"), (Pairs{{"flag", ""}}));
  EXPECT_EQ(Parse("a=&b"), (Pairs{{"a", ""}, {"b", ""}}));
  EXPECT_EQ(Parse("&&a=1&&b=2&"), (Pairs{{"a", "1"}, {"b", "2"}}));
  EXPECT_EQ(Parse("&"), Pairs{});
  EXPECT_EQ(Parse("+=+"), (Pairs{{" ", " "}}));  // a key of one space is not empty
}

TEST(ParseQueryTest, DuplicatesAreKeptAndReported) {
  auto q = ParseQuery("ticket=a&x=1&ticket=b&x=2&ticket=c");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->size(), 5u);
  EXPECT_EQ(q->Count("ticket"), 3u);
  EXPECT_EQ(q->Count("none"), 0u);
  EXPECT_EQ(q->First("ticket").value_or(""), "a");
  EXPECT_FALSE(q->First("none"));
  EXPECT_EQ(q->FirstDuplicate().value_or(""), "ticket");

  auto dup = q->Unique("ticket");
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(dup.error().message, "query parameter \"ticket\" is given 3 times; it may appear once");

  auto none = q->Unique("none");
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);

  auto single = ParseQuery("session_id=s1&ticket=t1");
  ASSERT_TRUE(single);
  EXPECT_FALSE(single->FirstDuplicate());
  auto t = single->Unique("ticket");
  ASSERT_TRUE(t && *t);
  EXPECT_EQ(**t, "t1");
}

TEST(ParseQueryTest, KeysOutsideAnAllowedSet) {
  auto q = ParseQuery("ticket=a&session_id=b&debug=1");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->FirstKeyOutside({"ticket", "session_id", "last_seq"}).value_or(""), "debug");
  EXPECT_FALSE(q->FirstKeyOutside({"ticket", "session_id", "debug"}));
}

TEST(ParseQueryTest, BadPercentEscapesNameTheParameterAndTheOffset) {
  EXPECT_EQ(ParseError("ticket=ab%zzcd"),
            "query parameter \"ticket\" (at byte 0): \"%zz\" at byte 9 is not a percent-escape "
            "(% and two hex digits)");
  // In the key, in a later pair (offsets count from the start of the query).
  EXPECT_EQ(ParseError("a=1&se%4gssion=2"),
            "query parameter \"se%4gssion\" (at byte 4): \"%4g\" at byte 6 is not a "
            "percent-escape (% and two hex digits)");
  // Truncated escapes at the end.
  EXPECT_EQ(ParseError("a=%"),
            "query parameter \"a\" (at byte 0): \"%\" at byte 2 is not a percent-escape (% and "
            "two hex digits)");
  EXPECT_EQ(ParseError("a=%4"),
            "query parameter \"a\" (at byte 0): \"%4\" at byte 2 is not a percent-escape (% and "
            "two hex digits)");
  // A key with control bytes is escaped in the message.
  EXPECT_EQ(ParseError("k\x1b=%G0"),
            "query parameter \"k\\e\" (at byte 0): \"%G0\" at byte 3 is not a percent-escape (% "
            "and two hex digits)");
}

TEST(ParseQueryTest, EmptyNamesAndNulBytesAreRefused) {
  EXPECT_EQ(ParseError("a=1&=v"), "the query parameter at byte 4 has an empty name (\"=v\")");
  EXPECT_EQ(ParseError("="), "the query parameter at byte 0 has an empty name (\"=\")");
  EXPECT_EQ(ParseError("ticket=a%00b"),
            "query parameter \"ticket\" (at byte 0): a NUL byte at byte 8 (NUL is not allowed "
            "in a query)");
  EXPECT_EQ(ParseError("x%00=1"),
            "query parameter \"x%00\" (at byte 0): a NUL byte at byte 1 (NUL is not allowed in "
            "a query)");
  EXPECT_EQ(ParseError(std::string_view("a=b\0c", 5)),
            "query parameter \"a\" (at byte 0): a NUL byte at byte 3 (NUL is not allowed in a "
            "query)");
}

TEST(ParseQueryTest, CapsOnCountAndLength) {
  QueryLimits limits{.max_params = 3, .max_bytes = 20};
  auto ok = ParseQuery("a=1&b=2&c=3", limits);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->size(), 3u);
  EXPECT_EQ(ParseError("a=1&b=2&c=3&d=4", limits),
            "query parameter \"d\" (at byte 12): more than 3 query parameters");
  // Empty pieces do not count.
  EXPECT_TRUE(ParseQuery("a=1&&&b=2&&c=3", limits));
  EXPECT_EQ(ParseError(std::string(21, 'x'), limits),
            "the query string is 21 bytes, more than the 20 allowed");
  EXPECT_TRUE(ParseQuery(std::string(20, 'x'), limits));
  // The defaults: 64 pairs, 8 KiB.
  std::string many;
  for (int i = 0; i < 65; ++i)
    many += "k" + std::to_string(i) + "=v&";
  EXPECT_EQ(ParseError(many),
            "query parameter \"k64\" (at byte 374): more than 64 query parameters");
  EXPECT_EQ(ParseError("a=" + std::string(8 << 10, 'v')),
            "the query string is 8194 bytes, more than the 8192 allowed");
}

TEST(ParseQueryTest, EncodeQueryComponentRoundTrips) {
  EXPECT_EQ(EncodeQueryComponent("a b&c=d+e/é~"), "a+b%26c%3Dd%2Be%2F%C3%A9~");
  const std::string all = [] {
    std::string s;
    for (int c = 1; c < 256; ++c)
      s.push_back(static_cast<char>(c));
    return s;
  }();
  auto q = ParseQuery(EncodeQueryComponent(all) + "=" + EncodeQueryComponent(all));
  ASSERT_TRUE(q) << q.error().message;
  ASSERT_EQ(q->size(), 1u);
  EXPECT_EQ(q->pairs()[0].first, all);
  EXPECT_EQ(q->pairs()[0].second, all);
}

}  // namespace
}  // namespace edge::http
