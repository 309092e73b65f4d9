#include "common/struct_json.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/utf8.h"

namespace edge {
namespace {

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;
using nlohmann::json;

// Where a value is, rendered only for an error: a chain of keys and indexes up to the top.
struct Path {
  const Path* parent = nullptr;
  std::string_view key;  // a member's name, or
  size_t index = 0;      // an element's index when key is null
  bool top = true;

  std::string Render(std::string_view field) const {
    std::string tail;
    for (const Path* p = this; p != nullptr && !p->top; p = p->parent) {
      tail.insert(0, p->key.data() != nullptr ? "." + std::string(p->key)
                                              : "[" + std::to_string(p->index) + "]");
    }
    return std::string(field) + tail;
  }
  Path Member(std::string_view name) const { return Path{this, name, 0, false}; }
  Path Element(size_t i) const { return Path{this, {}, i, false}; }
};

Error Invalid(std::string_view field, const Path& path, const std::string& why) {
  return Error{ErrorCode::kInvalidArgument, path.Render(field) + ": " + why};
}

// Text for a Struct string or key: as it is when it is UTF-8, else with every invalid sequence
// replaced by U+FFFD exactly as the JSON text round trip did (nlohmann's dump with
// error_handler_t::replace, read back).
std::string Utf8Text(const std::string& s) {
  if (IsValidUtf8(s)) return s;
  return json::parse(json(s).dump(-1, ' ', false, json::error_handler_t::replace))
      .get<std::string>();
}

Error TooDeep(std::string_view field, const Path& path) {
  return Invalid(field, path,
                 "more than " + std::to_string(kMaxStructDepth) + " nested arrays and objects");
}

// Whether protobuf's JSON printer wrote `d` (finite) as integer digits, which read back as a
// JSON integer. It prints "%.15g" when that reads back exactly, else "%.17g" (SimpleDtoa):
// whole numbers below 1e15 come out as digits either way; from 1e15 to 1e17 as digits only
// when 15 significant digits do not hold them (1000000000000001, not 1e+15); above, always
// with an exponent.
bool PrintedAsInteger(double d) {
  if (d != std::trunc(d)) return false;
  const double magnitude = std::fabs(d);
  if (magnitude < 1e15) return true;
  if (magnitude >= 1e17) return false;
  char text[32];
  std::snprintf(text, sizeof(text), "%.15g", d);
  return std::strtod(text, nullptr) != d;
}

// `depth`: the arrays and objects `j` is in (0 at the top).
Status ToValue(const json& j, std::string_view field, const Path& path, size_t depth, Value& out) {
  if ((j.is_array() || j.is_object()) && depth >= kMaxStructDepth) {
    return std::unexpected(TooDeep(field, path));
  }
  switch (j.type()) {
    case json::value_t::null:
    case json::value_t::discarded:
      out.set_null_value(google::protobuf::NULL_VALUE);
      return OkStatus();
    case json::value_t::boolean:
      out.set_bool_value(j.get<bool>());
      return OkStatus();
    case json::value_t::number_integer:
      out.set_number_value(static_cast<double>(j.get<int64_t>()));
      return OkStatus();
    case json::value_t::number_unsigned:
      out.set_number_value(static_cast<double>(j.get<uint64_t>()));
      return OkStatus();
    case json::value_t::number_float: {
      const double d = j.get<double>();
      // JSON text has no NaN or infinity: the text round trip wrote them as null.
      if (std::isfinite(d)) {
        out.set_number_value(d);
      } else {
        out.set_null_value(google::protobuf::NULL_VALUE);
      }
      return OkStatus();
    }
    case json::value_t::string:
      out.set_string_value(Utf8Text(j.get_ref<const std::string&>()));
      return OkStatus();
    case json::value_t::array: {
      ListValue* list = out.mutable_list_value();
      size_t i = 0;
      for (const auto& item : j) {
        if (auto st = ToValue(item, field, path.Element(i), depth + 1, *list->add_values()); !st) {
          return st;
        }
        ++i;
      }
      return OkStatus();
    }
    case json::value_t::object: {
      auto* fields = out.mutable_struct_value()->mutable_fields();
      for (const auto& [key, item] : j.items()) {
        std::string name = Utf8Text(key);
        if (auto st = ToValue(item, field, path.Member(name), depth + 1, (*fields)[name]); !st) {
          return st;
        }
      }
      return OkStatus();
    }
    case json::value_t::binary:
      return std::unexpected(Invalid(field, path, "binary values have no Struct form"));
  }
  return std::unexpected(Invalid(field, path, "unknown JSON type"));
}

Status ToJson(const Value& v, std::string_view field, const Path& path, size_t depth, json& out);

// The members of `s` (at `path`, `depth` arrays and objects deep) as a JSON object.
Status FieldsToJson(const Struct& s, std::string_view field, const Path& path, size_t depth,
                    json& out) {
  out = json::object();
  for (const auto& [key, item] : s.fields()) {
    if (item.kind_case() == Value::KIND_NOT_SET) continue;  // printed as nothing
    std::string name = Utf8Text(key);
    json element;
    if (auto st = ToJson(item, field, path.Member(name), depth + 1, element); !st) return st;
    out[name] = std::move(element);
  }
  return OkStatus();
}

Status ToJson(const Value& v, std::string_view field, const Path& path, size_t depth, json& out) {
  if ((v.has_list_value() || v.has_struct_value()) && depth >= kMaxStructDepth) {
    return std::unexpected(TooDeep(field, path));
  }
  switch (v.kind_case()) {
    case Value::kNullValue:
      out = nullptr;
      return OkStatus();
    case Value::kBoolValue:
      out = v.bool_value();
      return OkStatus();
    case Value::kNumberValue: {
      const double d = v.number_value();
      if (std::isnan(d)) {
        out = "NaN";
      } else if (std::isinf(d)) {
        out = d > 0 ? "Infinity" : "-Infinity";
      } else if (PrintedAsInteger(d)) {
        // Typed as nlohmann reads the digits: unsigned unless there is a minus sign ("-0" too).
        if (std::signbit(d)) {
          out = static_cast<int64_t>(d);
        } else {
          out = static_cast<uint64_t>(d);
        }
      } else {
        out = d;
      }
      return OkStatus();
    }
    case Value::kStringValue:
      out = Utf8Text(v.string_value());
      return OkStatus();
    case Value::kListValue: {
      out = json::array();
      const auto& values = v.list_value().values();
      for (int i = 0; i < values.size(); ++i) {
        const Value& item = values[i];
        if (item.kind_case() == Value::KIND_NOT_SET) continue;  // printed as nothing
        json element;
        if (auto st = ToJson(item, field, path.Element(static_cast<size_t>(i)), depth + 1, element);
            !st) {
          return st;
        }
        out.push_back(std::move(element));
      }
      return OkStatus();
    }
    case Value::kStructValue:
      return FieldsToJson(v.struct_value(), field, path, depth, out);
    case Value::KIND_NOT_SET:
      break;
  }
  return std::unexpected(Invalid(field, path, "a Value with no kind set"));
}

}  // namespace

Result<Struct> JsonToStruct(const json& j, std::string_view field) {
  if (!j.is_object()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(field) + ": must be a JSON object, got " + j.type_name());
  }
  Value v;
  if (auto st = ToValue(j, field, Path{}, 0, v); !st) return std::unexpected(st.error());
  return std::move(*v.mutable_struct_value());
}

Result<Value> JsonToValue(const json& j, std::string_view field) {
  Value v;
  if (auto st = ToValue(j, field, Path{}, 0, v); !st) return std::unexpected(st.error());
  return v;
}

Result<json> StructToJson(const Struct& s, std::string_view field) {
  json out;
  if (auto st = FieldsToJson(s, field, Path{}, 0, out); !st) return std::unexpected(st.error());
  return out;
}

Result<json> ValueToJson(const Value& v, std::string_view field) {
  json out;
  if (auto st = ToJson(v, field, Path{}, 0, out); !st) return std::unexpected(st.error());
  return out;
}

}  // namespace edge
