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

// A mapping's header line: "start-end perms offset dev inode [path]" (the path may hold
// spaces); each of its fields follows on a line of its own ("Anonymous:      0 kB").
std::vector<FileMapping> ReleasableFileMappings(std::string_view proc_smaps) {
  std::vector<FileMapping> out;
  FileMapping candidate;   // the current mapping,
  bool qualifies = false;  // while it qualifies
  bool pure = false;       // its Anonymous line said 0 kB
  auto finish = [&] {
    if (qualifies && pure) out.push_back(std::move(candidate));
    qualifies = pure = false;
  };
  while (!proc_smaps.empty()) {
    size_t nl = proc_smaps.find('\n');
    std::string_view line = proc_smaps.substr(0, nl);
    proc_smaps.remove_prefix(nl == std::string_view::npos ? proc_smaps.size() : nl + 1);
    std::string_view rest = line;
    std::string_view first = NextField(rest);
    if (first == "Anonymous:") {
      std::string_view kb = NextField(rest);
      pure = kb == "0";
      continue;
    }
    size_t dash = first.find('-');
    FileMapping m;
    if (dash == std::string_view::npos || !ParseHex(first.substr(0, dash), m.start) ||
        !ParseHex(first.substr(dash + 1), m.end)) {
      continue;  // another field of the current mapping, or a line that does not parse
    }
    finish();  // a new mapping begins
    std::string_view perms = NextField(rest);
    NextField(rest);  // offset
    NextField(rest);  // device
    NextField(rest);  // inode
    size_t b = rest.find_first_not_of(' ');
    std::string_view path = b == std::string_view::npos ? std::string_view{} : rest.substr(b);
    if (m.end <= m.start || perms.size() != 4 || perms[0] != 'r' || perms[1] == 'w') continue;
    if (path.empty() || path.front() != '/') continue;
    m.path = std::string(path);
    candidate = std::move(m);
    qualifies = true;
  }
  finish();
  return out;
}

Result<PageRelease> ReleaseFilePages(const std::vector<FileMapping>& mappings) {
  PageRelease done;
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
    if (errno == ENOMEM) continue;  // unmapped since /proc/self/smaps was read
    return MakeError(ErrorCode::kInternal,
                     "madvise(MADV_PAGEOUT) on " + m.path + ": " + std::strerror(errno));
  }
  return done;
}

Result<PageRelease> ReleaseFilePages() {
  std::ifstream in("/proc/self/smaps");
  if (!in) return MakeError(ErrorCode::kUnavailable, "cannot read /proc/self/smaps");
  std::ostringstream text;
  text << in.rdbuf();
  return ReleaseFilePages(ReleasableFileMappings(text.str()));
}

}  // namespace edge::daemon
