// The worker contract's shell quoting (wire.md §4, worker.exec shell mode): a command and
// its extra args become one `sh -c` script `<command> '<arg1>' '<arg2>'`, each arg in single
// quotes with every embedded single quote written as '"'"'. The command itself is shell
// text chosen by the caller and is not quoted. Pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace edge::sandbox {

// `arg` in single quotes: "it's" -> 'it'"'"'s'; "" -> ''.
std::string ShellQuote(std::string_view arg);

// "<command> '<arg1>' '<arg2>'..." (just the command when there are no args).
std::string ShellCommandLine(std::string_view command, const std::vector<std::string>& args);

// {"/bin/sh", "-c", ShellCommandLine(command, args)}.
std::vector<std::string> ShellArgv(std::string_view command, const std::vector<std::string>& args);

}  // namespace edge::sandbox
