// StructJson: the mapping of protobuf's JSON format for Struct/Value, checked against Structs
// and JSON written out by hand, and against protobuf's own JSON utilities (the text round
// trip both sides used before, issue 14) for the cases the two must agree on.
#include "common/struct_json.h"

#include <gtest/gtest.h>

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <cmath>
#include <limits>
#include <string>

namespace edge {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;
using google::protobuf::util::MessageDifferencer;
using nlohmann::json;

Value Number(double d) {
  Value v;
  v.set_number_value(d);
  return v;
}
Value Text(const std::string& s) {
  Value v;
  v.set_string_value(s);
  return v;
}

TEST(StructJsonTest, JsonBecomesTheStructItDescribes) {
  const json in = json::parse(R"({"s":"x","n":2,"f":1.5,"b":true,"z":null,
                                  "a":[1,"two",[3]],"o":{"k":"v"}})");
  Struct want;
  auto& f = *want.mutable_fields();
  f["s"] = Text("x");
  f["n"] = Number(2);
  f["f"] = Number(1.5);
  f["b"].set_bool_value(true);
  f["z"].set_null_value(google::protobuf::NULL_VALUE);
  auto* a = f["a"].mutable_list_value();
  *a->add_values() = Number(1);
  *a->add_values() = Text("two");
  *a->add_values()->mutable_list_value()->add_values() = Number(3);
  (*f["o"].mutable_struct_value()->mutable_fields())["k"] = Text("v");

  auto got = JsonToStruct(in, "args");
  ASSERT_TRUE(got) << got.error().ToString();
  EXPECT_TRUE(MessageDifferencer::Equals(*got, want)) << got->DebugString();
  // The text round trip the doors used before gives the same Struct.
  Struct old;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(in.dump(), &old).ok());
  EXPECT_TRUE(MessageDifferencer::Equals(*got, old));
}

TEST(StructJsonTest, NumbersAreDoublesAndTheUnrepresentableBecomeNull) {
  json in = json::object();
  in["big"] = std::numeric_limits<uint64_t>::max();
  in["neg"] = int64_t{-9007199254740993};
  in["nan"] = std::numeric_limits<double>::quiet_NaN();
  in["inf"] = -std::numeric_limits<double>::infinity();
  auto got = JsonToStruct(in, "payload");
  ASSERT_TRUE(got) << got.error().ToString();
  const auto& f = got->fields();
  EXPECT_EQ(f.at("big").number_value(), 18446744073709551616.0);
  EXPECT_EQ(f.at("neg").number_value(), -9007199254740992.0);  // the nearest double
  EXPECT_TRUE(f.at("nan").has_null_value());
  EXPECT_TRUE(f.at("inf").has_null_value());
}

TEST(StructJsonTest, TextThatIsNotUtf8GetsReplacementCharacters) {
  json in = json::object();
  in["out"] = std::string("ok\xff\xfe", 4);
  in[std::string("k\xc3", 2)] = "v";  // a key cut inside a two-byte character
  auto got = JsonToStruct(in, "payload");
  ASSERT_TRUE(got) << got.error().ToString();
  EXPECT_EQ(got->fields().at("out").string_value(), "ok\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(got->fields().at("k\xEF\xBF\xBD").string_value(), "v");
  // As nlohmann's dump with error_handler_t::replace wrote it for the text round trip.
  Struct old;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  in.dump(-1, ' ', false, json::error_handler_t::replace), &old)
                  .ok());
  EXPECT_TRUE(MessageDifferencer::Equals(*got, old));
}

TEST(StructJsonTest, StructBecomesJsonWithIntegralNumbersAsIntegers) {
  Struct in;
  auto& f = *in.mutable_fields();
  f["two"] = Number(2);
  f["half"] = Number(0.5);
  f["edge"] = Number(999999999999999);    // 15 digits: still an integer
  f["e15"] = Number(1e15);                // printed 1e+15 by protobuf: a double
  f["us"] = Number(1764000000123456);     // 16 digits: "%.17g", digits: an integer
  f["e16"] = Number(1e16);                // "%.15g" holds it: 1e+16, a double
  f["e17"] = Number(100000000000000016);  // always an exponent from 1e17
  f["unset"];                             // no kind: left out, as protobuf's printer did
  f["negzero"] = Number(-0.0);
  f["nan"] = Number(std::nan(""));
  f["inf"] = Number(std::numeric_limits<double>::infinity());
  f["ninf"] = Number(-std::numeric_limits<double>::infinity());
  f["list"].mutable_list_value()->add_values()->set_bool_value(false);
  (*f["obj"].mutable_struct_value()->mutable_fields())["n"].set_null_value(
      google::protobuf::NULL_VALUE);
  auto got = StructToJson(in, "payload");
  ASSERT_TRUE(got) << got.error().ToString();
  const json& j = *got;
  EXPECT_TRUE(j["two"].is_number_integer());
  EXPECT_EQ(j["two"].get<int64_t>(), 2);
  EXPECT_TRUE(j["half"].is_number_float());
  EXPECT_EQ(j["half"].get<double>(), 0.5);
  EXPECT_TRUE(j["edge"].is_number_integer());
  EXPECT_EQ(j["edge"].get<int64_t>(), 999999999999999);
  EXPECT_TRUE(j["e15"].is_number_float());
  EXPECT_TRUE(j["us"].is_number_integer());
  EXPECT_EQ(j["us"].get<int64_t>(), 1764000000123456);
  EXPECT_TRUE(j["e16"].is_number_float());
  EXPECT_TRUE(j["e17"].is_number_float());
  EXPECT_FALSE(j.contains("unset"));
  EXPECT_TRUE(j["negzero"].is_number_integer());
  EXPECT_EQ(j["nan"], "NaN");
  EXPECT_EQ(j["inf"], "Infinity");
  EXPECT_EQ(j["ninf"], "-Infinity");
  EXPECT_EQ(j["list"], json::array({false}));
  EXPECT_EQ(j["obj"], (json{{"n", nullptr}}));
  EXPECT_EQ(j.dump(),
            R"({"e15":1e+15,"e16":1e+16,"e17":1.0000000000000002e+17,"edge":999999999999999,)"
            R"("half":0.5,"inf":"Infinity","list":[false],"nan":"NaN","negzero":0,)"
            R"("ninf":"-Infinity","obj":{"n":null},"two":2,"us":1764000000123456})");
}

// Protobuf's own printer, read back by nlohmann, is the reference for every number's type.
TEST(StructJsonTest, NumbersComeOutAsProtobufsPrinterWroteThem) {
  for (double d :
       {2.0, -3.0, -0.0, 0.5, 999999999999999.0, 1e15, 1000000000000001.0, 1764000000123456.0, 1e16,
        12345678901234568.0, 1e17, 123456789012345678.0, 1e300, 5e-324}) {
    std::string text;
    ASSERT_TRUE(google::protobuf::util::MessageToJsonString(Number(d), &text).ok());
    const json reference = json::parse(text);
    auto ours = ValueToJson(Number(d), "n");
    ASSERT_TRUE(ours) << ours.error().ToString();
    EXPECT_EQ(ours->type(), reference.type()) << d << ": protobuf wrote " << text;
    EXPECT_EQ(*ours, reference) << d;
  }
}

TEST(StructJsonTest, ValuesConvertBothWays) {
  auto v = JsonToValue(json::array({1, "a", nullptr}), "value");
  ASSERT_TRUE(v) << v.error().ToString();
  ASSERT_TRUE(v->has_list_value());
  ASSERT_EQ(v->list_value().values_size(), 3);
  EXPECT_EQ(v->list_value().values(1).string_value(), "a");
  auto back = ValueToJson(*v, "value");
  ASSERT_TRUE(back) << back.error().ToString();
  EXPECT_EQ(back->dump(), R"([1,"a",null])");
  auto scalar = ValueToJson(Text("t"), "value");
  ASSERT_TRUE(scalar);
  EXPECT_EQ(*scalar, "t");
}

TEST(StructJsonTest, BadInputIsRefusedNamingTheFieldAndThePath) {
  auto not_object = JsonToStruct(json::array({1}), "payload");
  ASSERT_FALSE(not_object);
  EXPECT_EQ(not_object.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(not_object.error().message, "payload: must be a JSON object, got array");

  auto no_kind = ValueToJson(Value(), "invoke_tool.args");
  ASSERT_FALSE(no_kind);
  EXPECT_EQ(no_kind.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(no_kind.error().message, "invoke_tool.args: a Value with no kind set");
  Struct unset;
  (*unset.mutable_fields())["items"].mutable_list_value()->add_values();  // no kind: skipped
  auto skipped = StructToJson(unset, "invoke_tool.args");
  ASSERT_TRUE(skipped) << skipped.error().ToString();
  EXPECT_EQ(skipped->dump(), R"({"items":[]})");

  // 100 nested arrays and objects (the top object counts) pass; 101 do not.
  auto nest = [](size_t arrays) {
    json j = 1;
    for (size_t i = 0; i < arrays; ++i)
      j = json::array({j});
    return json{{"deep", j}};
  };
  EXPECT_TRUE(JsonToStruct(nest(99), "args"));
  auto deep = JsonToStruct(nest(100), "args");
  ASSERT_FALSE(deep);
  EXPECT_EQ(deep.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(deep.error().message.rfind("args.deep[0][0]", 0), 0u) << deep.error().message;
  EXPECT_NE(deep.error().message.find("more than 100 nested arrays and objects"),
            std::string::npos);
  // The same bound the other way: a Struct that deep (a controller may send one) is refused.
  Value v = Number(1);
  for (int i = 0; i < 100; ++i) {
    Value outer;
    *outer.mutable_list_value()->add_values() = v;
    v = outer;
  }
  Struct s;
  (*s.mutable_fields())["deep"] = v;
  auto too_deep = StructToJson(s, "invoke_tool.args");
  ASSERT_FALSE(too_deep);
  EXPECT_NE(too_deep.error().message.find("more than 100 nested"), std::string::npos);
}

}  // namespace
}  // namespace edge
