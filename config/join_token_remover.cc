#include "config/join_token_remover.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "common/atomic_file.h"

namespace edge::config {
namespace {

struct Line {
  std::string text;  // without its newline
  bool has_newline;
};

std::vector<Line> SplitLines(const std::string& text) {
  std::vector<Line> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) {
      lines.push_back({text.substr(pos), false});
      break;
    }
    lines.push_back({text.substr(pos, nl - pos), true});
    pos = nl + 1;
  }
  return lines;
}

size_t Indent(const std::string& s) {
  size_t i = 0;
  while (i < s.size() && s[i] == ' ')
    ++i;
  return i;
}

bool IsBlankOrComment(const std::string& s) {
  size_t i = Indent(s);
  return i == s.size() || s[i] == '#' || s.substr(i) == "\r";
}

// `key:` at the start of the (trimmed) line, followed by end, space or a comment.
bool StartsWithKey(const std::string& s, size_t indent, const std::string& key) {
  if (s.compare(indent, key.size(), key) != 0) return false;
  size_t after = indent + key.size();
  if (after >= s.size() || s[after] != ':') return false;
  return after + 1 == s.size() || s[after + 1] == ' ' || s[after + 1] == '\t' ||
         s[after + 1] == '\r' || s[after + 1] == '#';
}

}  // namespace

Status JoinTokenRemover::CheckRewritable(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    return MakeError(
        ErrorCode::kFailedPrecondition,
        "config file " + path + " does not exist, so the join token cannot be removed from it");
  }
  if (S_ISLNK(st.st_mode)) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(path, ec);
    return MakeError(ErrorCode::kFailedPrecondition,
                     "config file " + path + " is a symlink" +
                         (ec ? std::string() : " to " + target.string()) +
                         ": rewriting it would replace the link; point --config at the real file");
  }
  if (!S_ISREG(st.st_mode)) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "config file " + path + " is not a regular file");
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  if (::access(dir.c_str(), W_OK) != 0) {
    return MakeError(
        ErrorCode::kFailedPrecondition,
        "directory " + dir + " is not writable, so the join token cannot be removed from " + path);
  }
  return OkStatus();
}

Result<std::string> JoinTokenRemover::RemoveFromText(const std::string& text, bool* removed) {
  *removed = false;
  auto lines = SplitLines(text);
  // Find the top-level `controller:` key.
  size_t i = 0;
  for (; i < lines.size(); ++i) {
    const auto& s = lines[i].text;
    if (Indent(s) == 0 && StartsWithKey(s, 0, "controller")) break;
  }
  if (i == lines.size()) return text;
  {
    const auto& s = lines[i].text;
    size_t colon = s.find(':');
    size_t v = s.find_first_not_of(" \t", colon + 1);
    if (v != std::string::npos && s[v] == '{') {
      if (s.find("join_token", colon) != std::string::npos) {
        return MakeError(ErrorCode::kFailedPrecondition,
                         "controller is a flow-style map ({...}); write it as a block map so the "
                         "join token can be removed");
      }
      return text;
    }
  }
  // Inside the controller block: lines indented > 0 (blank lines and comments don't end it).
  for (size_t j = i + 1; j < lines.size(); ++j) {
    const auto& s = lines[j].text;
    if (IsBlankOrComment(s)) continue;
    size_t ind = Indent(s);
    if (ind == 0) break;
    if (!StartsWithKey(s, ind, "join_token")) continue;
    // Found it: remove it and every following line indented deeper (block scalar or
    // continuation of a multi-line value).
    size_t end = j + 1;
    while (end < lines.size()) {
      const auto& n = lines[end].text;
      if (Indent(n) == n.size() || n == "\r") {
        // A blank line belongs to the value only if a deeper line follows it.
        size_t k = end;
        while (k < lines.size() &&
               (Indent(lines[k].text) == lines[k].text.size() || lines[k].text == "\r"))
          ++k;
        if (k < lines.size() && Indent(lines[k].text) > ind) {
          end = k;
          continue;
        }
        break;
      }
      if (Indent(n) <= ind) break;
      ++end;
    }
    lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(j),
                lines.begin() + static_cast<std::ptrdiff_t>(end));
    *removed = true;
    break;
  }
  std::string out;
  out.reserve(text.size());
  for (const auto& l : lines) {
    out += l.text;
    if (l.has_newline) out += '\n';
  }
  return out;
}

Result<bool> JoinTokenRemover::RemoveJoinToken(const std::string& path, std::string_view token) {
  // The file is read first: one without the entry (a token from the environment, say) is
  // left alone, read-only or a symlink as it may be.
  auto text = ReadFile(path, 4 << 20);
  if (!text) return std::unexpected(text.error());
  bool removed = false;
  auto out = RemoveFromText(*text, &removed);
  if (!out) return std::unexpected(out.error());
  if (!removed) {
    if (!token.empty() && text->find(token) != std::string::npos) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "controller.join_token stays in " + path +
                           ": it is written in a form this agent does not rewrite (JSON or "
                           "flow-style YAML); remove it by hand");
    }
    return false;
  }
  if (auto st = CheckRewritable(path); !st) return std::unexpected(st.error());
  struct stat st {};
  ::stat(path.c_str(), &st);
  if (auto w = WriteFileAtomic(path, *out, {.mode = static_cast<mode_t>(st.st_mode & 07777)}); !w) {
    return std::unexpected(w.error());
  }
  if (::geteuid() == 0) {
    [[maybe_unused]] int rc = ::chown(path.c_str(), st.st_uid, st.st_gid);
  }
  return true;
}

}  // namespace edge::config
