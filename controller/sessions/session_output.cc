#include "controller/sessions/session_output.h"

#include "common/json_parse.h"
#include "common/utf8.h"

namespace edge::controller {
namespace {

bool HasPrefix(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

bool IsProcessFrameType(std::string_view t) {
  if (t == "session.started" || t == "session.ended" || t == "session.error") return false;
  return (HasPrefix(t, "agent.") || HasPrefix(t, "tool.") || HasPrefix(t, "session.")) &&
         t.size() <= 128;
}

}  // namespace

ProcessFrame SessionOutput::Classify(bool stderr_stream, std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (!stderr_stream && !line.empty() && line.front() == '{' && IsValidUtf8(line)) {
    if (auto doc = ParseJsonBounded(line, "line"); doc && doc->is_object()) {
      auto type = doc->find("type");
      auto payload = doc->find("payload");
      auto turn = doc->find("turn_id");
      const bool payload_ok = payload == doc->end() || payload->is_object();
      const bool turn_ok = turn == doc->end() || turn->is_null() || turn->is_string();
      if (type != doc->end() && type->is_string() &&
          IsProcessFrameType(type->get_ref<const std::string&>()) && payload_ok && turn_ok) {
        ProcessFrame f;
        f.type = type->get<std::string>();
        f.payload = payload == doc->end() ? nlohmann::json::object() : *payload;
        if (turn != doc->end() && turn->is_string()) f.turn_id = turn->get<std::string>();
        return f;
      }
    }
  }
  ProcessFrame f;
  f.type = "agent.output";
  f.payload = {{"stream", stderr_stream ? "stderr" : "stdout"}, {"data", ToValidUtf8(line)}};
  return f;
}

void SessionOutput::Emit(bool stderr_stream, std::string_view line, const Sink& sink) {
  sink(Classify(stderr_stream, line));
}

void SessionOutput::Append(bool stderr_stream, std::string_view bytes, const Sink& sink) {
  std::string& part = partial_[stderr_stream ? 1 : 0];
  while (!bytes.empty()) {
    const size_t nl = bytes.find('\n');
    const size_t take = nl == std::string_view::npos ? bytes.size() : nl;
    part.append(bytes.substr(0, take));
    // A line above the limit is handed out in pieces as it grows.
    while (part.size() > max_line_) {
      size_t cut = Utf8CutPoint(part, max_line_);
      if (cut == 0) cut = max_line_;
      Emit(stderr_stream, std::string_view(part).substr(0, cut), sink);
      part.erase(0, cut);
    }
    if (nl == std::string_view::npos) break;
    Emit(stderr_stream, part, sink);
    part.clear();
    bytes.remove_prefix(nl + 1);
  }
}

void SessionOutput::Flush(const Sink& sink) {
  for (int i = 0; i < 2; ++i) {
    if (!partial_[i].empty()) Emit(i == 1, partial_[i], sink);
    partial_[i].clear();
  }
}

}  // namespace edge::controller
