// Corpus replayer for compilers without libFuzzer: runs LLVMFuzzerTestOneInput once per
// file (directories are walked), then deterministic mutations of each input, so the fuzz
// targets still run under ctest with ASan/UBSan.
//
// Every corpus input is always replayed whole. The mutations (every prefix length at a stride
// of size/64+1, and a single-byte flip at each of those offsets) are replayed round-robin over
// the inputs — round r does mutation r of every input — until all are done or the time budget
// runs out (`--budget-seconds S`, default 10; 0 = no limit). The budget keeps a replay bounded
// on a loaded machine (issue 16: one replay took 295 s of ctest's 300 s under stress-ng); the
// round-robin order means a cut-short replay has still mutated every input a little rather
// than a few inputs fully. The open-ended search is scripts/fuzz.sh's job, not this one's: the
// budget was 30 s until the 12 replays were a fifth of the suite's time (stop 26); replaying
// the corpus itself takes about a second each.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void Run(std::string_view input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

size_t Stride(const std::string& input) {
  return input.size() / 64 + 1;
}

}  // namespace

int main(int argc, char** argv) {
  double budget_seconds = 10;
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--budget-seconds" && i + 1 < argc) {
      char* end = nullptr;
      budget_seconds = std::strtod(argv[++i], &end);
      if (end == argv[i] || *end != '\0' || budget_seconds < 0) {
        std::fprintf(stderr, "--budget-seconds: '%s' is not a non-negative number\n", argv[i]);
        return 2;
      }
      continue;
    }
    std::filesystem::path p(arg);
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
      inputs.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  for (const auto& input : inputs)
    Run(input);

  const auto start = std::chrono::steady_clock::now();
  const auto out_of_time = [&] {
    return budget_seconds > 0 &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >=
               budget_seconds;
  };
  size_t mutations = 0, planned = 0;
  for (const auto& input : inputs)
    planned += 2 * ((input.size() + Stride(input) - 1) / Stride(input));
  bool cut = false;
  for (size_t round = 0; !cut; ++round) {
    bool any = false;
    for (const auto& input : inputs) {
      const size_t n = round * Stride(input);
      if (n >= input.size()) continue;
      any = true;
      if (out_of_time()) {
        cut = true;
        break;
      }
      Run(std::string_view(input).substr(0, n));
      std::string flipped = input;
      flipped[n] = static_cast<char>(flipped[n] ^ 0x5a);
      Run(flipped);
      mutations += 2;
    }
    if (!any) break;
  }
  std::printf("replayed %zu inputs and %zu of %zu mutations%s\n", inputs.size(), mutations, planned,
              cut ? " (time budget reached)" : "");
  return inputs.empty() ? 1 : 0;
}
