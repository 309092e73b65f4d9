#include "agent/daemon/memory_trim.h"

#include <link.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "common/atomic_file.h"

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

// The next field of `line` separated by spaces or tabs (advancing it); empty at the end.
std::string_view NextField(std::string_view& line) {
  size_t b = line.find_first_not_of(" \t");
  if (b == std::string_view::npos) {
    line = {};
    return {};
  }
  line.remove_prefix(b);
  size_t e = line.find_first_of(" \t");
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

namespace {

// One mapping of a smaps text, as read.
struct Listed {
  FileMapping range;
  uint64_t major = 0, minor = 0, inode = 0;  // inode 0: not backed by a file
  bool read_only = false;                    // readable, not writable
  int copies_only = 0;                       // how many of its Anonymous and Swap said 0 kB
};

// Every mapping of a smaps text. A mapping's header line: "start-end perms offset
// major:minor inode [path]" (the path may hold spaces; major and minor in hex); each of its
// fields follows on a line of its own ("Anonymous:      0 kB").
std::vector<Listed> ListMappings(std::string_view proc_smaps) {
  std::vector<Listed> out;
  bool parsed = false;  // the current header parsed (its fields belong to out.back())
  while (!proc_smaps.empty()) {
    size_t nl = proc_smaps.find('\n');
    std::string_view line = proc_smaps.substr(0, nl);
    proc_smaps.remove_prefix(nl == std::string_view::npos ? proc_smaps.size() : nl + 1);
    std::string_view rest = line;
    const std::string_view first = NextField(rest);
    if (first == "Anonymous:" || first == "Swap:") {
      if (parsed && NextField(rest) == "0") ++out.back().copies_only;
      continue;
    }
    if (first == "Rss:") {
      uint64_t kb = 0;
      if (parsed && ParseNumber(NextField(rest), kb, 10))
        out.back().range.resident_bytes = kb << 10;
      continue;
    }
    // A header: "x-y", then four permission letters; any other line is a field.
    const std::string_view perms = NextField(rest);
    const size_t dash = first.find('-');
    if (dash == std::string_view::npos || perms.size() != 4 || first.back() == ':') continue;
    parsed = false;   // a new mapping begins, whether or not it parses
    NextField(rest);  // offset
    const std::string_view dev = NextField(rest), inode = NextField(rest);
    const size_t colon = dev.find(':');
    Listed m;
    if (!ParseNumber(first.substr(0, dash), m.range.start, 16) ||
        !ParseNumber(first.substr(dash + 1), m.range.end, 16) || m.range.end <= m.range.start ||
        colon == std::string_view::npos || !ParseNumber(dev.substr(0, colon), m.major, 16) ||
        !ParseNumber(dev.substr(colon + 1), m.minor, 16) || !ParseNumber(inode, m.inode, 10)) {
      continue;
    }
    m.read_only = perms[0] == 'r' && perms[1] != 'w';
    out.push_back(m);
    parsed = true;
  }
  return out;
}

}  // namespace

std::vector<FileMapping> ReleasableMappings(std::string_view proc_smaps,
                                            const std::vector<uintptr_t>& addresses_in_files) {
  const std::vector<Listed> all = ListMappings(proc_smaps);
  std::vector<const Listed*> files;  // the mapping holding each address
  for (uintptr_t address : addresses_in_files) {
    for (const auto& m : all) {
      if (m.range.start <= address && address < m.range.end && m.inode != 0) files.push_back(&m);
    }
  }
  std::vector<FileMapping> out;
  for (const auto& m : all) {
    if (!m.read_only || m.copies_only != 2) continue;
    for (const Listed* file : files) {
      if (m.major == file->major && m.minor == file->minor && m.inode == file->inode) {
        out.push_back(m.range);
        break;
      }
    }
  }
  return out;
}

Result<bool> DropPages(uintptr_t start, uintptr_t end) {
  if (::madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED) == 0) return true;
  if (errno == ENOMEM || errno == EINVAL) return false;
  char range[48];
  std::snprintf(range, sizeof range, "%#lx-%#lx", static_cast<unsigned long>(start),
                static_cast<unsigned long>(end));
  return MakeError(ErrorCode::kInternal,
                   std::string("madvise(MADV_DONTNEED) on code or read-only data at ") + range +
                       ": " + std::strerror(errno));
}

int64_t TracerPid(std::string_view proc_status) {
  size_t at = proc_status.find("\nTracerPid:");
  if (at == std::string_view::npos) return 0;
  std::string_view rest = proc_status.substr(at + 11);
  rest = rest.substr(0, rest.find('\n'));
  int64_t pid = 0;
  return ParseNumber(NextField(rest), pid, 10) ? pid : 0;
}

bool HasTextRelocations(const struct dl_phdr_info& info) {
  for (ElfW(Half) i = 0; i < info.dlpi_phnum; ++i) {
    if (info.dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
    const auto* dyn =
        reinterpret_cast<const ElfW(Dyn)*>(info.dlpi_addr + info.dlpi_phdr[i].p_vaddr);
    for (; dyn->d_tag != DT_NULL; ++dyn) {
      if (dyn->d_tag == DT_TEXTREL) return true;
      if (dyn->d_tag == DT_FLAGS && (dyn->d_un.d_val & DF_TEXTREL) != 0) return true;
    }
  }
  return false;
}

std::vector<FileMapping> ReadOnlySegments(const struct dl_phdr_info& object, uintptr_t page) {
  std::vector<FileMapping> out;
  if (HasTextRelocations(object)) return out;
  for (ElfW(Half) i = 0; i < object.dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = object.dlpi_phdr[i];
    if (segment.p_type != PT_LOAD || (segment.p_flags & PF_W) != 0 || segment.p_memsz == 0) {
      continue;
    }
    const uintptr_t start = object.dlpi_addr + segment.p_vaddr;
    out.push_back(
        {.start = start & ~(page - 1), .end = (start + segment.p_memsz + page - 1) & ~(page - 1)});
  }
  return out;
}

namespace {

// dl_iterate_phdr's callback for LoadedObjectsNow: one address per object, in its first
// loadable segment (the executable's holds its program headers).
int CollectObject(struct dl_phdr_info* info, size_t, void* data) {
  auto* objects = static_cast<LoadedObjects*>(data);
  objects->loads = info->dlpi_adds;
  objects->unloads = info->dlpi_subs;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type == PT_LOAD) {
      objects->addresses.push_back(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
      break;
    }
  }
  return 0;
}

// What ReleaseLoadedCodePages asks of the loader's list, the second time round.
struct ReleaseUnderLoaderLock {
  const LoadedObjects* listed;
  const std::vector<FileMapping>* mappings;
  uintptr_t page = 4096;
  std::vector<bool> dropped;  // per mapping: some of its pages were
  bool first = true;
  bool unchanged = false;
  Status error;
};

// Drops, for one object of the list, what lies both in one of the chosen mappings and in one of
// its loadable segments that are not writable: every byte given to madvise is then the
// object's own code or read-only data, which the held list keeps mapped where it is.
int ReleaseIfUnchanged(struct dl_phdr_info* info, size_t, void* data) {
  auto* call = static_cast<ReleaseUnderLoaderLock*>(data);
  if (call->first) {  // the counts are the loader's, the same for every object
    call->first = false;
    call->unchanged =
        info->dlpi_adds == call->listed->loads && info->dlpi_subs == call->listed->unloads;
    if (!call->unchanged) return 1;
  }
  for (const FileMapping& segment : ReadOnlySegments(*info, call->page)) {
    for (size_t m = 0; m < call->mappings->size(); ++m) {
      const FileMapping& mapping = (*call->mappings)[m];
      const uintptr_t lo = std::max(segment.start, mapping.start);
      const uintptr_t hi = std::min(segment.end, mapping.end);
      if (lo >= hi) continue;
      auto dropped = DropPages(lo, hi);
      if (!dropped) {
        call->error = std::unexpected(dropped.error());
        return 1;
      }
      if (*dropped) call->dropped[m] = true;
    }
  }
  return 0;
}

}  // namespace

LoadedObjects LoadedObjectsNow() {
  LoadedObjects objects;
  ::dl_iterate_phdr(CollectObject, &objects);
  return objects;
}

Result<PageRelease> ReleaseLoadedCodePages(const std::function<void()>& after_listing) {
  auto status = ReadFile("/proc/self/status", 1 << 20);
  if (!status) return std::unexpected(status.error());
  if (int64_t tracer = TracerPid(*status); tracer != 0) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     "a tracer is attached (pid " + std::to_string(tracer) +
                         "): its breakpoints may sit in these pages");
  }
  const LoadedObjects listed = LoadedObjectsNow();
  auto smaps = ReadFile("/proc/self/smaps", 64 << 20);
  if (!smaps) return std::unexpected(smaps.error());
  const std::vector<FileMapping> mappings = ReleasableMappings(*smaps, listed.addresses);
  if (after_listing) after_listing();
  // The pages are dropped while the loader's list is held (dl_iterate_phdr takes its lock), and
  // only if nothing was loaded or unloaded since the objects were listed, before smaps was
  // read: every listed mapping is then still the object's own, and stays so meanwhile.
  ReleaseUnderLoaderLock call{.listed = &listed,
                              .mappings = &mappings,
                              .page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE)),
                              .dropped = std::vector<bool>(mappings.size())};
  ::dl_iterate_phdr(ReleaseIfUnchanged, &call);
  if (!call.unchanged) {
    return MakeError(ErrorCode::kUnavailable,
                     "a library was loaded or unloaded while the mappings were listed");
  }
  if (!call.error) return std::unexpected(call.error.error());
  PageRelease done;
  for (size_t m = 0; m < mappings.size(); ++m) {
    if (!call.dropped[m]) continue;
    ++done.mappings;
    done.resident_bytes += mappings[m].resident_bytes;
  }
  return done;
}

}  // namespace edge::daemon
