#include "controller/sessions/rawp_frame.h"

#include <array>
#include <cctype>
#include <set>

#include "common/json_parse.h"
#include "common/random.h"
#include "common/rfc3339.h"
#include "common/utf8.h"

namespace edge::controller {
namespace {

using nlohmann::json;

// How much of a refused value an error message quotes.
constexpr size_t kQuote = 64;
constexpr size_t kMaxTurnId = 128;
constexpr size_t kMaxQuery = 1024;
constexpr size_t kMaxPromptTools = 64;
constexpr size_t kMaxToolName = 128;
constexpr int64_t kMaxSearchLimit = 1000;

std::string Quote(std::string_view s) {
  std::string out = ToValidUtf8(s.substr(0, Utf8CutPoint(s, kQuote)));
  if (s.size() > kQuote) out += "…";
  return "\"" + out + "\"";
}

std::unexpected<Error> Bad(std::string message) {
  return MakeError(ErrorCode::kInvalidArgument, "frame: " + std::move(message));
}

const char* TypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::binary:
      return "binary";
    case json::value_t::discarded:
      return "discarded";
    default:
      return "a number";
  }
}

// A required string member of `obj`, or an error naming `where.key`.
Result<std::string> StringField(const json& obj, std::string_view where, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end()) return Bad(std::string(where) + key + " is missing");
  if (!it->is_string())
    return Bad(std::string(where) + key + " must be a string, not " + TypeName(*it));
  return it->get<std::string>();
}

Status OnlyKeys(const json& obj, std::string_view where, std::initializer_list<const char*> keys) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool known = false;
    for (const char* k : keys)
      known = known || it.key() == k;
    if (!known) return Bad(std::string(where) + Quote(it.key()) + " is not a known key");
  }
  return {};
}

Status CheckPayload(const std::string& type, const json& p, size_t max_text_bytes) {
  if (type == "control.prompt.request") {
    if (auto s = OnlyKeys(p, "payload.", {"text", "tools"}); !s) return s;
    auto text = StringField(p, "payload.", "text");
    if (!text) return std::unexpected(text.error());
    if (text->empty()) return Bad("payload.text is empty");
    if (text->size() > max_text_bytes)
      return Bad("payload.text is " + std::to_string(text->size()) + " bytes, above the limit of " +
                 std::to_string(max_text_bytes));
    if (auto it = p.find("tools"); it != p.end()) {
      if (!it->is_array())
        return Bad(std::string("payload.tools must be an array, not ") + TypeName(*it));
      if (it->size() > kMaxPromptTools)
        return Bad("payload.tools has " + std::to_string(it->size()) + " entries, above " +
                   std::to_string(kMaxPromptTools));
      for (size_t i = 0; i < it->size(); ++i) {
        const json& t = (*it)[i];
        const std::string where = "payload.tools[" + std::to_string(i) + "]";
        if (!t.is_string()) return Bad(where + " must be a string, not " + TypeName(t));
        const auto& name = t.get_ref<const std::string&>();
        if (name.empty() || name.size() > kMaxToolName)
          return Bad(where + " " + Quote(name) + " must be 1.." + std::to_string(kMaxToolName) +
                     " bytes");
      }
    }
    return {};
  }
  if (type == "control.interrupt" || type == "control.file.search.cancel" ||
      type == "control.session.close") {
    if (!p.empty()) return Bad("payload of " + type + " must be {}");
    return {};
  }
  if (type == "control.interaction.response") return {};
  if (type == "control.file.search") {
    if (auto s = OnlyKeys(p, "payload.", {"query", "limit"}); !s) return s;
    auto query = StringField(p, "payload.", "query");
    if (!query) return std::unexpected(query.error());
    if (query->size() > kMaxQuery)
      return Bad("payload.query is " + std::to_string(query->size()) + " bytes, above " +
                 std::to_string(kMaxQuery));
    if (auto it = p.find("limit"); it != p.end()) {
      if (!it->is_number_integer())
        return Bad(std::string("payload.limit must be an integer, not ") + it->dump());
      const int64_t limit = it->get<int64_t>();
      if (limit < 1 || limit > kMaxSearchLimit)
        return Bad("payload.limit " + std::to_string(limit) + " is outside 1.." +
                   std::to_string(kMaxSearchLimit));
    }
    return {};
  }
  return Bad("type " + Quote(type) +
             " is not a control frame (control.prompt.request, control.interrupt, "
             "control.interaction.response, control.file.search, control.file.search.cancel, "
             "control.session.close)");
}

}  // namespace

bool IsUuidV4(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash != (s[i] == '-')) return false;
    if (!dash && !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  const char variant = static_cast<char>(std::tolower(static_cast<unsigned char>(s[19])));
  return s[14] == '4' && (variant == '8' || variant == '9' || variant == 'a' || variant == 'b');
}

Result<ControlFrame> ParseControlFrame(std::string_view text, std::string_view session_id,
                                       size_t max_text_bytes) {
  auto doc = ParseJsonBounded(text, "frame");
  if (!doc) return std::unexpected(doc.error());
  if (!doc->is_object()) return Bad(std::string("must be a JSON object, not ") + TypeName(*doc));
  const json& o = *doc;
  if (auto s = OnlyKeys(
          o, "", {"v", "type", "message_id", "timestamp", "session_id", "turn_id", "payload"});
      !s)
    return std::unexpected(s.error());
  auto v = StringField(o, "", "v");
  if (!v) return std::unexpected(v.error());
  if (*v != kRawpVersion) return Bad("v " + Quote(*v) + " is not \"rawp-dps-1.0\"");
  ControlFrame f;
  auto type = StringField(o, "", "type");
  if (!type) return std::unexpected(type.error());
  f.type = std::move(*type);
  auto mid = StringField(o, "", "message_id");
  if (!mid) return std::unexpected(mid.error());
  if (!IsUuidV4(*mid)) return Bad("message_id " + Quote(*mid) + " is not a UUIDv4");
  f.message_id = std::move(*mid);
  auto ts = StringField(o, "", "timestamp");
  if (!ts) return std::unexpected(ts.error());
  if (!ParseRfc3339(*ts)) return Bad("timestamp " + Quote(*ts) + " is not RFC 3339");
  f.timestamp = std::move(*ts);
  auto sid = StringField(o, "", "session_id");
  if (!sid) return std::unexpected(sid.error());
  if (*sid != session_id)
    return Bad("session_id " + Quote(*sid) + " is not this socket's session " + Quote(session_id));
  f.session_id = std::move(*sid);
  if (auto it = o.find("turn_id"); it != o.end() && !it->is_null()) {
    if (!it->is_string()) return Bad(std::string("turn_id must be a string, not ") + TypeName(*it));
    const auto& t = it->get_ref<const std::string&>();
    if (t.empty() || t.size() > kMaxTurnId)
      return Bad("turn_id " + Quote(t) + " must be 1.." + std::to_string(kMaxTurnId) + " bytes");
    f.turn_id = t;
  }
  auto p = o.find("payload");
  if (p == o.end()) return Bad("payload is missing");
  if (!p->is_object()) return Bad(std::string("payload must be an object, not ") + TypeName(*p));
  if (auto s = CheckPayload(f.type, *p, max_text_bytes); !s) return std::unexpected(s.error());
  f.payload = *p;
  return f;
}

std::string SerializeFrame(const OutFrame& frame, uint64_t seq, const Clock& clock) {
  json o = json::object();
  o["v"] = kRawpVersion;
  o["type"] = frame.type;
  o["message_id"] = frame.message_id.empty() ? NewUuidV4() : frame.message_id;
  o["timestamp"] = frame.timestamp.empty() ? FormatRfc3339(clock.Now()) : frame.timestamp;
  if (!frame.session_id.empty()) o["session_id"] = frame.session_id;
  if (frame.turn_id) o["turn_id"] = *frame.turn_id;
  if (seq > 0) o["seq"] = seq;
  o["payload"] = frame.payload;
  return o.dump(-1, ' ', false, json::error_handler_t::replace);
}

OutFrame SessionError(std::string_view session_id, std::string_view code, std::string_view message,
                      std::string_view ref_message_id) {
  OutFrame f;
  f.type = "session.error";
  f.session_id = std::string(session_id);
  f.payload = {{"code", code}, {"message", ToValidUtf8(message)}};
  if (!ref_message_id.empty()) f.payload["ref_message_id"] = ToValidUtf8(ref_message_id);
  return f;
}

}  // namespace edge::controller
