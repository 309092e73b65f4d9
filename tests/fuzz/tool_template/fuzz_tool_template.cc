// Fuzzes ToolTemplate: the input is split into a template (lines before an empty line, one
// argv element each) and JSON args (the rest). Parse and Render must never crash, and a
// rendered argv always has exactly as many elements as the template.
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
  if (rendered && rendered->size() != tmpl.size()) std::abort();
  return 0;
}
