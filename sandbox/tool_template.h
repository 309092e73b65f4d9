// ToolTemplate: a config-defined tool's argv template (`tools.<name>.command`), e.g.
// ["grep", "-n", "{pattern}", "file-{n}.txt"], filled from the typed JSON args of a call.
// Each placeholder `{name}` is replaced by the arg's value (string as is, number in JSON
// form, bool as true/false) inside exactly the one argv element that holds it: no shell is
// involved and no value can add, split or remove argv elements. `{{` and `}}` are literal
// braces. An immutable value; parse once at config load, render per call.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"

namespace edge::sandbox {

class ToolTemplate {
 public:
  // INVALID_ARGUMENT naming the element and the position for an empty template, an empty
  // argv[0], an unclosed `{`, a stray `}`, or a placeholder name outside [A-Za-z0-9_.-]{1,64}.
  static Result<ToolTemplate> Parse(const std::vector<std::string>& argv);

  // `args` must be a JSON object (null counts as {}). Every placeholder needs an arg that is a
  // string, number or bool: INVALID_ARGUMENT naming the arg when it is missing or is an
  // object, array or null, or when a string holds a NUL byte. Args no placeholder uses are
  // ignored.
  Result<std::vector<std::string>> Render(const nlohmann::json& args) const;

  // The placeholder names in order of first use.
  const std::vector<std::string>& placeholders() const { return names_; }

 private:
  struct Piece {
    bool placeholder = false;
    std::string text;  // literal text or placeholder name
  };
  std::vector<std::vector<Piece>> elements_;
  std::vector<std::string> names_;
};

}  // namespace edge::sandbox
