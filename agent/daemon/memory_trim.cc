#include "agent/daemon/memory_trim.h"

#include <malloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>

namespace edge::daemon {

size_t TrimFreeMemory(size_t threshold_bytes) {
  const struct mallinfo2 info = ::mallinfo2();
  if (info.fordblks < threshold_bytes) return 0;
  ::malloc_trim(0);
  return info.fordblks;
}

bool ArenaLimitSetByEnvironment(const char* malloc_arena_max, const char* glibc_tunables) {
  if (malloc_arena_max != nullptr) return true;
  return glibc_tunables != nullptr &&
         std::string_view(glibc_tunables).find("glibc.malloc.arena_max") != std::string_view::npos;
}

void LimitMallocArenas(int arenas) {
  if (ArenaLimitSetByEnvironment(std::getenv("MALLOC_ARENA_MAX"), std::getenv("GLIBC_TUNABLES"))) {
    return;
  }
  ::mallopt(M_ARENA_MAX, arenas);
}

namespace {

// The next space-separated field of `line` (advancing it); empty at the end.
std::string_view NextField(std::string_view& line) {
  size_t b = line.find_first_not_of(' ');
  if (b == std::string_view::npos) {
    line = {};
    return {};
  }
  line.remove_prefix(b);
  size_t e = line.find(' ');
  std::string_view field = line.substr(0, e);
  line.remove_prefix(e == std::string_view::npos ? line.size() : e);
  return field;
}

template <typename T>
bool ParseNumber(std::string_view s, T& out, int base) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

// A mapping's header line: "start-end perms offset major:minor inode [path]" (the path may
// hold spaces); each of its fields follows on a line of its own ("Anonymous:      0 kB").
std::vector<FileMapping> ReleasableMappings(std::string_view proc_smaps, const FileId& file) {
  std::vector<FileMapping> out;
  FileMapping candidate;   // the current mapping,
  bool qualifies = false;  // while it qualifies
  int copies_only = 0;     // how many of its Anonymous and Swap lines said 0 kB
  auto finish = [&] {
    if (qualifies && copies_only == 2) out.push_back(std::move(candidate));
    candidate = FileMapping{};
    qualifies = false;
    copies_only = 0;
  };
  while (!proc_smaps.empty()) {
    size_t nl = proc_smaps.find('\n');
    std::string_view line = proc_smaps.substr(0, nl);
    proc_smaps.remove_prefix(nl == std::string_view::npos ? proc_smaps.size() : nl + 1);
    std::string_view rest = line;
    const std::string_view first = NextField(rest);
    if (first == "Anonymous:" || first == "Swap:") {
      if (NextField(rest) == "0") ++copies_only;
      continue;
    }
    if (first == "Rss:") {
      uint64_t kb = 0;
      if (ParseNumber(NextField(rest), kb, 10)) candidate.resident_bytes = kb * 1024;
      continue;
    }
    // A header: "x-y", then four permission letters; any other line is a field.
    const std::string_view perms = NextField(rest);
    const size_t dash = first.find('-');
    if (dash == std::string_view::npos || perms.size() != 4 || first.back() == ':') continue;
    finish();         // a new mapping begins, whether or not it parses
    NextField(rest);  // offset
    const std::string_view dev = NextField(rest), inode = NextField(rest);
    const size_t colon = dev.find(':');
    FileMapping m;
    uint64_t major = 0, minor = 0, ino = 0;
    if (!ParseNumber(first.substr(0, dash), m.start, 16) ||
        !ParseNumber(first.substr(dash + 1), m.end, 16) || m.end <= m.start ||
        colon == std::string_view::npos || !ParseNumber(dev.substr(0, colon), major, 16) ||
        !ParseNumber(dev.substr(colon + 1), minor, 16) || !ParseNumber(inode, ino, 10)) {
      continue;
    }
    if (perms[0] != 'r' || perms[1] == 'w') continue;
    if (major != file.dev_major || minor != file.dev_minor || ino != file.inode) continue;
    candidate = std::move(m);
    qualifies = true;
  }
  finish();
  return out;
}

Result<FileId> ExecutableFileId() {
  struct stat st {};
  if (::stat("/proc/self/exe", &st) != 0) {
    return MakeError(ErrorCode::kUnavailable,
                     std::string("cannot stat /proc/self/exe: ") + std::strerror(errno));
  }
  return FileId{.dev_major = major(st.st_dev), .dev_minor = minor(st.st_dev), .inode = st.st_ino};
}

Result<PageRelease> ReleaseMappings(const std::vector<FileMapping>& mappings) {
  PageRelease done;
  for (const auto& m : mappings) {
    if (::madvise(reinterpret_cast<void*>(m.start), m.end - m.start, MADV_DONTNEED) == 0) {
      ++done.mappings;
      done.resident_bytes += m.resident_bytes;
      continue;
    }
    // Gone since /proc/self/smaps was read (ENOMEM), or locked in memory (EINVAL): skipped.
    if (errno == ENOMEM || errno == EINVAL) continue;
    return MakeError(ErrorCode::kInternal, "madvise(MADV_DONTNEED) on the agent's own code at " +
                                               std::to_string(m.start) + ": " +
                                               std::strerror(errno));
  }
  return done;
}

Result<PageRelease> ReleaseExecutablePages() {
  auto exe = ExecutableFileId();
  if (!exe) return std::unexpected(exe.error());
  std::ifstream in("/proc/self/smaps");
  if (!in) return MakeError(ErrorCode::kUnavailable, "cannot read /proc/self/smaps");
  std::ostringstream text;
  text << in.rdbuf();
  return ReleaseMappings(ReleasableMappings(text.str(), *exe));
}

}  // namespace edge::daemon
