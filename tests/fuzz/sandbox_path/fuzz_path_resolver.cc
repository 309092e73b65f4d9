// Fuzz target for path resolution: whatever path arrives from the wire, every descriptor the
// resolver hands out (OpenBeneath, and the parent directory from OpenParent) must name
// something beneath the root — checked through /proc/self/fd — under both resolvers
// (openat2 and the O_NOFOLLOW walk); and FileService::Stat/List must only describe paths
// relative to the root. The tree holds symlinks to /etc, to a sibling outside the root and
// inside the root.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "sandbox/file_service.h"
#include "sandbox/scoped_root.h"

namespace {

using edge::sandbox::FileService;
using edge::sandbox::ResolveMode;
using edge::sandbox::ScopedRoot;

struct Tree {
  std::string base, root;
  Tree() {
    char tmpl[] = "/tmp/edge-fuzz-root-XXXXXX";
    base = ::mkdtemp(tmpl);
    root = base + "/root";
    std::filesystem::create_directories(root + "/a/b");
    std::filesystem::create_directories(base + "/outside");
    std::ofstream(root + "/a/b/f") << "x";
    std::ofstream(base + "/outside/secret") << "OUTSIDE";
    std::filesystem::create_symlink("/etc", root + "/etc");
    std::filesystem::create_symlink("../../outside", root + "/a/up");
    std::filesystem::create_symlink(base + "/outside", root + "/abs");
    std::filesystem::create_symlink("a/b", root + "/ab");
  }
  ~Tree() { std::filesystem::remove_all(base); }
};

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "escape (%s): %s\n", what, detail.c_str());
  std::abort();
}

void CheckBeneath(int fd, const std::string& root, const char* what) {
  char buf[4096] = {};
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  const std::string target(buf, n > 0 ? static_cast<size_t>(n) : 0);
  if (target != root && target.rfind(root + "/", 0) != 0) Fail(what, target);
}

void CheckRelative(const std::string& rel, const char* what) {
  if (!rel.empty() && (rel[0] == '/' || rel == ".." || rel.rfind("../", 0) == 0 ||
                       rel.find("/../") != std::string::npos)) {
    Fail(what, rel);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Tree tree;
  static auto openat2_root = ScopedRoot::Open(
      tree.root, ScopedRoot::KernelHasOpenat2() ? ResolveMode::kOpenat2 : ResolveMode::kWalk);
  static auto walk_root = ScopedRoot::Open(tree.root, ResolveMode::kWalk);
  static FileService openat2_files(*ScopedRoot::Open(tree.root, openat2_root->mode()));
  static FileService walk_files(*ScopedRoot::Open(tree.root, ResolveMode::kWalk));
  const std::string path(reinterpret_cast<const char*>(data), size);
  for (auto* sr : {&*openat2_root, &*walk_root}) {
    if (auto fd = sr->OpenBeneath(path, O_PATH)) CheckBeneath(fd->get(), tree.root, "open");
    if (auto parent = sr->OpenParent(path, /*create_parents=*/false)) {
      CheckBeneath(parent->first.get(), tree.root, "parent");
    }
  }
  for (auto* files : {&openat2_files, &walk_files}) {
    if (auto info = files->Stat(path)) CheckRelative(info->path, "stat");
    if (auto content = files->Read(path); content && *content == "OUTSIDE") Fail("read", path);
    if (auto list = files->List(path)) {
      for (const auto& fi : *list)
        CheckRelative(fi.path, "list");
    }
  }
  return 0;
}
