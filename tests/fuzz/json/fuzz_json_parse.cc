// Fuzz target: ParseJsonBounded, our JSON reader, against nlohmann::json::parse, another
// implementation. Both must accept the same texts and build the same values (same number
// types, floats bit for bit); what either refuses the other refuses too — except a document
// nested deeper than the limit, and bytes after a NUL that follows the value (nlohmann stops
// reading there), which only ours refuses. DumpJson of what was read must equal
// nlohmann's dump with replacement. ParseJsonBoundedInPlace must answer exactly as
// ParseJsonBounded does.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "common/json_parse.h"
#include "tests/support/same_json.h"

using nlohmann::json;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto ours = edge::ParseJsonBounded(text, "fuzz input");
  if (!edge::CheckJsonDepth(text, "fuzz input")) {
    if (ours) __builtin_trap();  // deeper than the limit: ours must refuse
    return 0;
  }
  // In place, every member string taken (take_min 0): the same answer, errors included, and
  // a refused text left as it was.
  std::string owned(text);
  auto in_place = edge::ParseJsonBoundedInPlace(owned, "fuzz input", edge::kDefaultJsonMaxDepth, 0);
  if (in_place.has_value() != ours.has_value()) __builtin_trap();
  if (ours && !edge::testing::SameJson(*in_place, *ours)) __builtin_trap();
  if (!ours && (in_place.error().message != ours.error().message || owned != text)) {
    __builtin_trap();
  }
  json theirs;
  bool ok = true;
  try {
    theirs = json::parse(text);
  } catch (const json::exception&) {
    ok = false;
  }
  // The one difference by design: nlohmann ends the text at a NUL byte after the value.
  if (!ours && ok && text.find('\0') != std::string_view::npos) return 0;
  if (ours.has_value() != ok) __builtin_trap();
  if (!ok) {
    if (ours.error().message.find("fuzz input is not valid JSON: at byte ") != 0) __builtin_trap();
    return 0;
  }
  if (!edge::testing::SameJson(*ours, theirs)) __builtin_trap();
  if (edge::DumpJson(*ours) != theirs.dump(-1, ' ', false, json::error_handler_t::replace)) {
    __builtin_trap();
  }
  return 0;
}
