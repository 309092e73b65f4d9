// Corpus replayer for compilers without libFuzzer: runs LLVMFuzzerTestOneInput once per
// file (directories are walked), plus a fixed set of mutations of each input, so the
// fuzz targets still run under ctest with ASan/UBSan.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void RunOne(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  // Deterministic mutations: every prefix length at a stride, and single-byte flips.
  const size_t stride = input.size() / 64 + 1;
  for (size_t n = 0; n < input.size(); n += stride) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), n);
    std::string flipped = input;
    flipped[n] = static_cast<char>(flipped[n] ^ 0x5a);
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(flipped.data()), flipped.size());
  }
}

}  // namespace

int main(int argc, char** argv) {
  size_t runs = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path p(argv[i]);
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(p)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else {
      files.push_back(p);
    }
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      RunOne(data);
      ++runs;
    }
  }
  std::printf("replayed %zu inputs\n", runs);
  return runs > 0 ? 0 : 1;
}
