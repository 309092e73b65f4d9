#include "sandbox/file_service.h"

#include <dirent.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>

#include "common/atomic_file.h"
#include "common/base64.h"
#include "common/huge_pages.h"
#include "common/random.h"
#include "common/string_fill.h"

namespace edge::sandbox {
namespace {

std::string JoinRel(std::string_view dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  return std::string(dir) + "/" + std::string(name);
}

std::string RelPath(std::string_view path) {
  auto parts = ScopedRoot::Normalize(path);
  std::string out;
  if (parts) {
    for (const auto& p : *parts)
      out = JoinRel(out, p);
  }
  return out;
}

std::string ModeString(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

FileInfo InfoFrom(const struct stat& st, std::string rel) {
  FileInfo fi;
  fi.path = std::move(rel);
  fi.size = static_cast<uint64_t>(st.st_size);
  fi.mode = ModeString(st.st_mode);
  fi.is_dir = S_ISDIR(st.st_mode);
  fi.mod_time = Clock::WallTime(std::chrono::seconds(st.st_mtim.tv_sec) +
                                std::chrono::duration_cast<Clock::WallTime::duration>(
                                    std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
  return fi;
}

// Opens the subdirectory `name` of `dirfd` for reading without following a symlink. A
// directory without read or search permission (a sandbox may chmod its own dirs to 0) is made
// 0700 first, through the /proc link of an O_PATH descriptor so that exactly that inode
// changes even if the name is swapped meanwhile.
int OpenSubdirForRemoval(int dirfd, const std::string& name) {
  int fd = ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0 || errno != EACCES) return fd;
  UniqueFd path(::openat(dirfd, name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!path) return -1;
  const std::string proc = "/proc/self/fd/" + std::to_string(path.get());
  if (::chmod(proc.c_str(), 0700) != 0) return -1;
  return ::openat(path.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

// Directories nested deeper than this below the one being emptied are moved up into it and
// removed by a later pass, so any depth is removed with a bounded number of open fds.
constexpr int kMaxRemoveDepth = 64;

// One pass removing everything inside the directory `dirfd` (not following symlinks);
// sets `*hoisted` when it moved a too-deep directory up into `top` for the next pass.
bool RemovePass(int top, int dirfd, int depth, bool* hoisted, const CancelCheck& cancelled) {
  int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    ::close(fd);
    return false;
  }
  std::vector<std::string> names;
  while (auto* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  for (const auto& n : names) {
    if (cancelled && cancelled()) {
      errno = ECANCELED;
      return false;
    }
    struct stat st {};
    if (::fstatat(dirfd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
    if (!S_ISDIR(st.st_mode)) {
      if (::unlinkat(dirfd, n.c_str(), 0) != 0) return false;
      continue;
    }
    if (depth >= kMaxRemoveDepth) {
      const std::string up = ".edge-rm-" + NewUuidV4();
      if (::renameat(dirfd, n.c_str(), top, up.c_str()) != 0) return false;
      *hoisted = true;
      continue;
    }
    UniqueFd sub(OpenSubdirForRemoval(dirfd, n));
    if (!sub || !RemovePass(top, sub.get(), depth + 1, hoisted, cancelled)) return false;
    if (::unlinkat(dirfd, n.c_str(), AT_REMOVEDIR) != 0) return false;
  }
  return true;
}

// Removes everything inside the directory `dirfd`, at any depth; errno is set on failure.
bool RemoveContents(int dirfd, const CancelCheck& cancelled) {
  for (int pass = 0; pass < 1 << 20; ++pass) {
    bool hoisted = false;
    if (!RemovePass(dirfd, dirfd, 0, &hoisted, cancelled)) return false;
    if (!hoisted) return true;
  }
  errno = ELOOP;
  return false;
}

}  // namespace

Result<mode_t> ParseOctalMode(std::string_view text, std::string_view field) {
  auto bad = [&] {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(field) + " \"" + std::string(text) +
                         "\" must be an octal permission such as \"0644\" (at most 4 digits 0-7)");
  };
  if (text.empty() || text.size() > 4) return bad();
  mode_t m = 0;
  for (char c : text) {
    if (c < '0' || c > '7') return bad();
    m = static_cast<mode_t>(m * 8 + static_cast<mode_t>(c - '0'));
  }
  // Set-user-ID, set-group-ID and sticky bits would let a file written by the agent (often
  // root) grant its owner's rights to whoever runs it: refused, never silently masked.
  if ((m & 07000) != 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string(field) + " \"" + std::string(text) +
                         "\": setuid, setgid and sticky bits (07000) are not allowed; use "
                         "permission bits 0000-0777 only");
  }
  return m;
}

Status FileService::Write(std::string_view path, std::string_view content,
                          std::string_view mode_text) {
  return Write(path, OnePiece(content), mode_text);
}

Status FileService::Write(std::string_view path, const ContentPieces& content,
                          std::string_view mode_text, UniqueFd* replaced) {
  if (replaced != nullptr) replaced->Reset();
  auto mode = ParseOctalMode(mode_text.empty() ? "0644" : mode_text);
  if (!mode) return std::unexpected(mode.error());
  auto parent = root_.OpenParent(path, /*create_parents=*/true, 0755);
  if (!parent) return std::unexpected(parent.error());
  auto& [dirfd, name] = *parent;
  UniqueFd dir(::openat(dirfd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return std::unexpected(PathError(errno, path, "open directory of"));
  int held = -1;
  auto done = ReplaceFileAt(dir.get(), name, content, *mode, replaced != nullptr ? &held : nullptr);
  if (!done) return std::unexpected(PathError(done.error().err, path, done.error().step));
  if (replaced != nullptr) *replaced = UniqueFd(held);
  return OkStatus();
}

Result<FileService::OpenRead> FileService::OpenForRead(std::string_view path, uint64_t offset,
                                                       std::optional<uint64_t> length) const {
  // Resolved O_PATH first: opening a FIFO or a device for reading could block or have side
  // effects, so only a regular file is then reopened (through its /proc link, which names
  // exactly the resolved inode) for reading.
  auto pathfd = root_.OpenBeneath(path, O_PATH);
  if (!pathfd) return std::unexpected(pathfd.error());
  struct stat st {};
  if (::fstat(pathfd->get(), &st) != 0) return std::unexpected(PathError(errno, path, "stat"));
  if (S_ISDIR(st.st_mode)) return std::unexpected(PathError(EISDIR, path, "read"));
  if (!S_ISREG(st.st_mode)) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "path \"" + std::string(path) + "\" is not a regular file");
  }
  const std::string proc = "/proc/self/fd/" + std::to_string(pathfd->get());
  UniqueFd fd(::open(proc.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::unexpected(PathError(errno, path, "open"));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (offset > size) {
    return MakeError(ErrorCode::kInvalidArgument, "offset " + std::to_string(offset) +
                                                      " is past the end of \"" + std::string(path) +
                                                      "\" (" + std::to_string(size) + " bytes)");
  }
  const uint64_t want = length ? std::min(*length, size - offset) : size - offset;
  if (want > max_read_bytes_) {
    return MakeError(ErrorCode::kResourceExhausted,
                     "reading " + std::to_string(want) + " bytes of \"" + std::string(path) +
                         "\" exceeds the limit of " + std::to_string(max_read_bytes_) +
                         " bytes: read it in parts with offset and length");
  }
  return OpenRead{std::move(fd), offset, want};
}

Result<uint64_t> FileService::ReadInto(std::string_view path, const OpenRead& file, uint64_t from,
                                       char* out, uint64_t count) const {
  constexpr uint64_t kStep = 4 << 20;  // a cancel is seen between 4 MiB reads
  uint64_t got = 0;
  while (got < count) {
    if (Cancelled()) return std::unexpected(PathError(ECANCELED, path, "read"));
    ssize_t n = ::pread(file.fd.get(), out + got, std::min(count - got, kStep),
                        static_cast<off_t>(file.offset + from + got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::unexpected(PathError(errno, path, "read"));
    }
    if (n == 0) break;  // the file shrank since it was opened
    got += static_cast<uint64_t>(n);
  }
  return got;
}

Result<std::string> FileService::Read(std::string_view path, uint64_t offset,
                                      std::optional<uint64_t> length) const {
  auto file = OpenForRead(path, offset, length);
  if (!file) return std::unexpected(file.error());
  std::string out;
  Status failed;
  // A file read whole: huge pages from 8 MiB on (common/string_fill.h), no zero fill.
  ResizeAndOverwrite(out, file->want, [&](char* p) {
    auto got = ReadInto(path, *file, 0, p, file->want);
    if (!got) failed = std::unexpected(got.error());
    return got.value_or(0);
  });
  if (!failed) return std::unexpected(failed.error());
  return out;
}

Result<FileService::Base64Read> FileService::ReadBase64(std::string_view path, uint64_t offset,
                                                        std::optional<uint64_t> length) const {
  auto file = OpenForRead(path, offset, length);
  if (!file) return std::unexpected(file.error());
  // 6 MiB at a time (a multiple of 3, so each piece's text follows the last's): the file's
  // bytes never sit in memory whole, only their text.
  constexpr uint64_t kPiece = uint64_t{6} << 20;
  const uint64_t room = std::min(kPiece, file->want);
  const auto piece = std::make_unique_for_overwrite<char[]>(room);
  Base64Read out;
  ReserveLarge(out.base64, Base64EncodedSize(file->want));
  while (out.size < file->want) {
    const uint64_t count = std::min(room, file->want - out.size);
    auto got = ReadInto(path, *file, out.size, piece.get(), count);
    if (!got) return std::unexpected(got.error());
    Base64EncodeAppend(std::string_view(piece.get(), *got), out.base64);
    out.size += *got;
    if (*got < count) break;  // the file shrank since it was opened: this piece was its last
  }
  return out;
}

Result<FileInfo> FileService::Stat(std::string_view path) const {
  auto fd = root_.OpenBeneath(path, O_PATH);
  if (!fd) return std::unexpected(fd.error());
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return std::unexpected(PathError(errno, path, "stat"));
  return InfoFrom(st, RelPath(path));
}

Result<std::vector<FileInfo>> FileService::List(std::string_view path, size_t max_entries) const {
  // Resolved O_PATH first: that is how the walk resolver tells a symlink (PATH_OUTSIDE_ROOT)
  // from a file that is not a directory; the directory itself is then opened for reading.
  auto fd = root_.OpenBeneath(path, O_PATH | O_DIRECTORY);
  if (!fd) return std::unexpected(fd.error());
  int dup = ::openat(fd->get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* d = dup >= 0 ? ::fdopendir(dup) : nullptr;
  if (d == nullptr) {
    if (dup >= 0) ::close(dup);
    return std::unexpected(PathError(errno, path, "list"));
  }
  const std::string base = RelPath(path);
  std::vector<FileInfo> out;
  while (auto* e = ::readdir(d)) {
    if (Cancelled()) {
      ::closedir(d);
      return std::unexpected(PathError(ECANCELED, path, "list"));
    }
    std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    if (out.size() >= max_entries) {
      ::closedir(d);
      return MakeError(ErrorCode::kResourceExhausted,
                       "directory '" + std::string(path) + "' holds more than " +
                           std::to_string(max_entries) +
                           " entries: list a narrower directory, or match with file_glob");
    }
    struct stat st {};
    if (::fstatat(fd->get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    out.push_back(InfoFrom(st, JoinRel(base, n)));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(),
            [](const FileInfo& a, const FileInfo& b) { return a.path < b.path; });
  return out;
}

Status FileService::Delete(std::string_view path, bool recursive) {
  auto parent = root_.OpenParent(path, false);
  if (!parent) return std::unexpected(parent.error());
  auto& [dirfd, name] = *parent;
  UniqueFd dir(::openat(dirfd.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct stat st {};
  if (::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return std::unexpected(PathError(errno, path, "delete"));
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(dir.get(), name.c_str(), 0) != 0)
      return std::unexpected(PathError(errno, path, "delete"));
    return OkStatus();
  }
  if (::unlinkat(dir.get(), name.c_str(), AT_REMOVEDIR) == 0) return OkStatus();
  if (errno != ENOTEMPTY && errno != EEXIST)
    return std::unexpected(PathError(errno, path, "delete"));
  if (!recursive) {
    return MakeError(
        ErrorCode::kFailedPrecondition,
        "directory \"" + std::string(path) + "\" is not empty: set recursive to delete it");
  }
  UniqueFd sub(OpenSubdirForRemoval(dir.get(), name));
  if (!sub || !RemoveContents(sub.get(), cancelled_) ||
      ::unlinkat(dir.get(), name.c_str(), AT_REMOVEDIR) != 0) {
    return std::unexpected(PathError(errno, path, "delete"));
  }
  return OkStatus();
}

Status FileService::Move(std::string_view from, std::string_view to) {
  auto src = root_.OpenParent(from, false);
  if (!src) return std::unexpected(src.error());
  auto dst = root_.OpenParent(to, true, 0755);
  if (!dst) return std::unexpected(dst.error());
  if (::renameat(src->first.get(), src->second.c_str(), dst->first.get(), dst->second.c_str()) !=
      0) {
    return std::unexpected(PathError(errno, from, "move"));
  }
  return OkStatus();
}

Status FileService::Chmod(std::string_view path, std::string_view mode_text) {
  auto mode = ParseOctalMode(mode_text);
  if (!mode) return std::unexpected(mode.error());
  auto fd = root_.OpenBeneath(path, O_PATH);
  if (!fd) return std::unexpected(fd.error());
  // An O_PATH descriptor cannot be fchmod'ed; its /proc link names exactly the resolved inode.
  const std::string proc = "/proc/self/fd/" + std::to_string(fd->get());
  if (::chmod(proc.c_str(), *mode) != 0) return std::unexpected(PathError(errno, path, "chmod"));
  return OkStatus();
}

Result<std::vector<std::string>> FileService::Glob(std::string_view pattern,
                                                   size_t max_matches) const {
  auto parts = ScopedRoot::Normalize(pattern);
  if (!parts) return std::unexpected(parts.error());
  std::string pat;
  for (const auto& p : *parts)
    pat = JoinRel(pat, p);
  if (pat.empty()) return MakeError(ErrorCode::kInvalidArgument, "pattern is empty");
  const size_t depth_limit = parts->size();
  std::vector<std::string> out;
  std::function<bool(int, const std::string&, size_t)> walk = [&](int dirfd, const std::string& rel,
                                                                  size_t depth) {
    int dup = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR* d = dup >= 0 ? ::fdopendir(dup) : nullptr;
    if (d == nullptr) {
      if (dup >= 0) ::close(dup);
      return true;
    }
    std::vector<std::string> names;
    while (auto* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    ::closedir(d);
    for (const auto& n : names) {
      if (Cancelled()) return false;
      const std::string child = JoinRel(rel, n);
      if (depth + 1 == depth_limit) {
        if (::fnmatch(pat.c_str(), child.c_str(), FNM_PATHNAME | FNM_PERIOD) == 0) {
          out.push_back(child);
          if (out.size() >= max_matches) return false;
        }
        continue;
      }
      // Only directories whose name matches this level of the pattern can hold matches.
      if (::fnmatch((*parts)[depth].c_str(), n.c_str(), FNM_PERIOD) != 0) continue;
      struct stat st {};
      if (::fstatat(dirfd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
        continue;
      int sub = ::openat(dirfd, n.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub < 0) continue;
      bool more = walk(sub, child, depth + 1);
      ::close(sub);
      if (!more) return false;
    }
    return true;
  };
  walk(root_.fd(), "", 0);
  if (Cancelled()) return std::unexpected(PathError(ECANCELED, pattern, "glob"));
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

const char* TypeName(mode_t m) {
  if (S_ISREG(m)) return "file";
  if (S_ISDIR(m)) return "dir";
  if (S_ISLNK(m)) return "symlink";
  return "other";
}

}  // namespace

Result<SearchResult> FileService::Search(std::string_view path, std::string_view query,
                                         size_t limit, size_t max_visited) const {
  // The searched directory itself must resolve beneath the root and be a directory.
  auto top = root_.OpenBeneath(path, O_PATH | O_DIRECTORY);
  if (!top) return std::unexpected(top.error());
  const std::string base = RelPath(path);
  const std::string needle = AsciiLower(query);
  SearchResult out;
  // Breadth first over paths relative to `path`; each directory is opened again beneath the
  // root (no descriptor per queued directory, no symlink followed out of the root).
  std::deque<std::string> dirs{""};
  while (!dirs.empty()) {
    if (Cancelled()) return std::unexpected(PathError(ECANCELED, path, "search"));
    const std::string rel = std::move(dirs.front());
    dirs.pop_front();
    UniqueFd fd;
    if (rel.empty()) {
      fd = UniqueFd(::openat(top->get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    } else {
      auto sub = root_.OpenBeneath(JoinRel(base, rel), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
      if (sub) fd = std::move(*sub);
    }
    if (!fd) {
      if (rel.empty()) return std::unexpected(PathError(errno, path, "search"));
      continue;  // unreadable or swapped meanwhile: skipped
    }
    int dup = ::dup(fd.get());
    DIR* d = dup >= 0 ? ::fdopendir(dup) : nullptr;
    if (d == nullptr) {
      if (dup >= 0) ::close(dup);
      continue;
    }
    std::vector<std::pair<std::string, mode_t>> entries;
    while (auto* e = ::readdir(d)) {
      std::string n = e->d_name;
      if (n == "." || n == "..") continue;
      if (out.visited >= max_visited) {
        out.truncated = true;
        break;
      }
      ++out.visited;
      struct stat st {};
      if (::fstatat(fd.get(), n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      entries.emplace_back(std::move(n), st.st_mode);
    }
    ::closedir(d);
    std::sort(entries.begin(), entries.end());
    for (const auto& [name, mode] : entries) {
      const std::string child = JoinRel(rel, name);
      if (AsciiLower(child).find(needle) != std::string::npos) {
        if (out.candidates.size() >= limit) {
          out.truncated = true;
          return out;
        }
        out.candidates.push_back({child, TypeName(mode)});
      }
      if (S_ISDIR(mode)) dirs.push_back(child);
    }
    if (out.visited >= max_visited && out.truncated) return out;
  }
  return out;
}

}  // namespace edge::sandbox
