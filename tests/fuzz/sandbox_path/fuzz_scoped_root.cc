// Fuzz target: whatever path arrives from the wire, a descriptor ScopedRoot opens must name
// something beneath the root (checked through /proc/self/fd), for both resolvers.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "sandbox/scoped_root.h"

namespace {

struct Tree {
  std::string base, root;
  Tree() {
    char tmpl[] = "/tmp/edge-fuzz-root-XXXXXX";
    base = ::mkdtemp(tmpl);
    root = base + "/root";
    std::filesystem::create_directories(root + "/a/b");
    std::filesystem::create_directories(base + "/outside");
    std::ofstream(root + "/a/b/f") << "x";
    std::filesystem::create_symlink("/etc", root + "/etc");
    std::filesystem::create_symlink("../../outside", root + "/a/up");
    std::filesystem::create_symlink("a/b", root + "/ab");
  }
  ~Tree() { std::filesystem::remove_all(base); }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Tree tree;
  static auto openat2_root =
      edge::sandbox::ScopedRoot::Open(tree.root, edge::sandbox::ScopedRoot::KernelHasOpenat2()
                                                     ? edge::sandbox::ResolveMode::kOpenat2
                                                     : edge::sandbox::ResolveMode::kWalk);
  static auto walk_root =
      edge::sandbox::ScopedRoot::Open(tree.root, edge::sandbox::ResolveMode::kWalk);
  std::string path(reinterpret_cast<const char*>(data), size);
  for (auto* sr : {&*openat2_root, &*walk_root}) {
    auto fd = sr->OpenBeneath(path, O_PATH);
    if (!fd) continue;
    char buf[4096] = {};
    std::string link = "/proc/self/fd/" + std::to_string(fd->get());
    ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
    std::string target(buf, n > 0 ? static_cast<size_t>(n) : 0);
    if (target != tree.root && target.rfind(tree.root + "/", 0) != 0) std::abort();
  }
  return 0;
}
