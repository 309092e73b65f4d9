#include "sandbox/shell_quote.h"

namespace edge::sandbox {

std::string ShellQuote(std::string_view arg) {
  std::string out;
  out.reserve(arg.size() + 2);
  out.push_back('\'');
  for (char c : arg) {
    if (c == '\'') {
      out += "'\"'\"'";
    } else {
      out.push_back(c);
    }
  }
  out.push_back('\'');
  return out;
}

std::string ShellCommandLine(std::string_view command, const std::vector<std::string>& args) {
  std::string out(command);
  for (const auto& arg : args) {
    out.push_back(' ');
    out += ShellQuote(arg);
  }
  return out;
}

std::vector<std::string> ShellArgv(std::string_view command, const std::vector<std::string>& args) {
  return {"/bin/sh", "-c", ShellCommandLine(command, args)};
}

}  // namespace edge::sandbox
