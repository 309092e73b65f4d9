#include "agent/daemon/memory_trim.h"

#include <malloc.h>
#include <sys/mman.h>

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

bool ParseHex(std::string_view s, uintptr_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

// A line: "start-end perms offset dev inode [path]"; the path may hold spaces.
std::vector<CodeMapping> ReleasableCodeMappings(std::string_view proc_maps) {
  std::vector<CodeMapping> out;
  while (!proc_maps.empty()) {
    size_t nl = proc_maps.find('\n');
    std::string_view line = proc_maps.substr(0, nl);
    proc_maps.remove_prefix(nl == std::string_view::npos ? proc_maps.size() : nl + 1);
    std::string_view range = NextField(line), perms = NextField(line);
    NextField(line);  // offset
    NextField(line);  // device
    NextField(line);  // inode
    size_t b = line.find_first_not_of(' ');
    std::string_view path = b == std::string_view::npos ? std::string_view{} : line.substr(b);
    size_t dash = range.find('-');
    CodeMapping m;
    if (dash == std::string_view::npos || !ParseHex(range.substr(0, dash), m.start) ||
        !ParseHex(range.substr(dash + 1), m.end) || m.end <= m.start) {
      continue;
    }
    if (perms.size() != 4 || perms[1] == 'w' || perms[2] != 'x') continue;
    if (path.empty() || path.front() != '/') continue;
    m.path = std::string(path);
    out.push_back(std::move(m));
  }
  return out;
}

Result<CodeRelease> ReleaseCodePages(const std::vector<CodeMapping>& mappings) {
  CodeRelease done;
  for (const auto& m : mappings) {
    if (::madvise(reinterpret_cast<void*>(m.start), m.end - m.start, MADV_PAGEOUT) == 0) {
      ++done.mappings;
      done.bytes += m.end - m.start;
      continue;
    }
    if (errno == EINVAL) {
      return MakeError(ErrorCode::kFailedPrecondition,
                       "madvise(MADV_PAGEOUT) is not supported by this kernel (Linux 5.4+)");
    }
    if (errno == ENOMEM) continue;  // unmapped since /proc/self/maps was read
    return MakeError(ErrorCode::kInternal,
                     "madvise(MADV_PAGEOUT) on " + m.path + ": " + std::strerror(errno));
  }
  return done;
}

Result<CodeRelease> ReleaseCodePages() {
  std::ifstream in("/proc/self/maps");
  if (!in) return MakeError(ErrorCode::kUnavailable, "cannot read /proc/self/maps");
  std::ostringstream text;
  text << in.rdbuf();
  return ReleaseCodePages(ReleasableCodeMappings(text.str()));
}

}  // namespace edge::daemon
