// ToolTemplate: a config-defined tool's argv template (`tools.<name>.command`), e.g.
// ["grep", "-n", "{pattern}", "file-{n}.txt"], filled from the typed JSON args of a call.
// Each placeholder `{name}` is replaced by the arg's value (string as is, number in JSON
// form, bool as true/false) inside exactly the one argv element that holds it: no shell is
// involved and no value can add, split or remove argv elements. `{{` and `}}` are literal
// braces. An immutable value; parse once at config load, render per call.
//
// Options. A value that would START an argv element with '-' is refused (INVALID_ARGUMENT
// naming the arg, the element and the value), because the program would read it as an
// option: with ["du", "-sh", "{path}"], path="--files0-from=/etc/shadow" would make du print
// that file. "The element starts with the value" means the element's template begins with a
// placeholder (literal text before it, as in "file-{n}" or "--name={v}", keeps the value
// from ever being first). Two ways let such a value through, both chosen by the template:
//   - `{name:opt}` marks the slot as taking options (only for a placeholder at offset 0 of
//     an element after argv[0]): the caller may pass "-x", "--flag=v" there;
//   - a literal element "--" earlier in the template (after argv[0]): every placeholder
//     after it is an operand for programs that follow the POSIX "--" convention (du, ls,
//     cat, grep, rm, ...), so a value starting with '-' is allowed there. Only put "--" in a
//     template for a program that honours it.
// The rule looks at the rendered text, so numbers count too: -3 at the start of an element
// needs `{n:opt}` or a preceding "--".
//
// The program. A value placed in argv[0] must not start with '-', and must not contain '/':
// a value can name a program on PATH (or a file in the template's directory, as in
// "/opt/tools/{t}") but never rewrite the path to another one ("../../bin/sh"). `:opt` is a
// parse error in argv[0].
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"

namespace edge::sandbox {

class ToolTemplate {
 public:
  // INVALID_ARGUMENT naming the element and the position for an empty template, an empty
  // argv[0], an unclosed `{`, a stray `}`, a placeholder name outside [A-Za-z0-9_.-]{1,64},
  // an unknown modifier (`{name:xyz}`; the only one is `:opt`), or `:opt` where it cannot
  // apply (argv[0], or not at the start of its element).
  static Result<ToolTemplate> Parse(const std::vector<std::string>& argv);

  // `args` must be a JSON object (null counts as {}). Every placeholder needs an arg that is a
  // string, number or bool: INVALID_ARGUMENT naming the arg when it is missing or is an
  // object, array or null, or when a string holds a NUL byte. Args no placeholder uses are
  // ignored. INVALID_ARGUMENT naming the arg, the element and the value (cut to 64 bytes) for
  // a value that would start an element with '-' outside an option slot, and for a value
  // in argv[0] that starts with '-' or holds '/' (see above).
  Result<std::vector<std::string>> Render(const nlohmann::json& args) const;

  // The placeholder names in order of first use.
  const std::vector<std::string>& placeholders() const { return names_; }

 private:
  struct Piece {
    bool placeholder = false;
    std::string text;           // literal text or placeholder name
    bool allow_option = false;  // `{name:opt}`
  };
  std::vector<std::vector<Piece>> elements_;
  std::vector<std::string> names_;
};

}  // namespace edge::sandbox
