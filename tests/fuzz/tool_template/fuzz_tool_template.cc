// Fuzzes ToolTemplate: the input is split into a template (lines before an empty line, one
// argv element each) and JSON args (the rest). Parse and Render must never crash, a rendered
// argv always has exactly as many elements as the template, and the option rule holds: an
// element whose template starts with a placeholder that is not `{name:opt}` never renders
// starting with '-' unless a literal "--" element (after argv[0]) came before it; argv[0]
// never gains a '/' from a value (checked as: a template argv[0] without '/' renders without).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sandbox/tool_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  size_t split = input.find("\n\n");
  std::string tmpl_text = input.substr(0, split);
  std::string args_text = split == std::string::npos ? "{}" : input.substr(split + 2);
  std::vector<std::string> tmpl;
  size_t start = 0;
  while (start <= tmpl_text.size()) {
    size_t end = tmpl_text.find('\n', start);
    if (end == std::string::npos) end = tmpl_text.size();
    tmpl.push_back(tmpl_text.substr(start, end - start));
    start = end + 1;
  }
  auto parsed = edge::sandbox::ToolTemplate::Parse(tmpl);
  if (!parsed) return 0;
  nlohmann::json args = nlohmann::json::parse(args_text, nullptr, false);
  if (args.is_discarded()) args = nlohmann::json::object();
  auto rendered = parsed->Render(args);
  if (!rendered) return 0;
  if (rendered->size() != tmpl.size()) std::abort();
  bool after_double_dash = false;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    const std::string& t = tmpl[i];
    const std::string& r = (*rendered)[i];
    bool starts_with_placeholder = t.size() >= 2 && t[0] == '{' && t[1] != '{';
    // Parse accepted the template, so its first placeholder's only possible modifier is :opt.
    size_t close = t.find('}');
    bool opt_slot = starts_with_placeholder && close != std::string::npos && close >= 5 &&
                    t.compare(close - 4, 5, ":opt}") == 0;
    if (starts_with_placeholder && !r.empty() && r[0] == '-' &&
        (i == 0 || (!opt_slot && !after_double_dash))) {
      std::abort();
    }
    if (i == 0 && t.find('/') == std::string::npos && r.find('/') != std::string::npos) {
      std::abort();
    }
    if (i > 0 && t == "--") after_double_dash = true;
  }
  return 0;
}
