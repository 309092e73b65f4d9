// BenchReport: the figures of one benchmark run — each a named set of samples with a unit,
// printed as "median p99 min max (n)" beside the baseline measured in the same run, and
// written as JSON (`--json PATH`, gathered by scripts/bench.sh into results.json). Header-only
// (nlohmann::json); benchmarks only, never a test assertion.
#pragma once

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace edge::bench {

struct Summary {
  double median = 0, p99 = 0, min = 0, max = 0;
  size_t n = 0;
};

inline Summary Summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.n = v.size();
  s.median = v[(v.size() - 1) / 2];
  s.p99 = v[std::min(v.size() - 1, (v.size() * 99 + 99) / 100 - 1)];
  s.min = v.front();
  s.max = v.back();
  return s;
}

// One figure as results.json holds it: {"name", "unit", "median", "p99", "min", "max", "n"}.
inline nlohmann::json FigureJson(const std::string& name, const std::string& unit,
                                 const Summary& s) {
  return {{"name", name}, {"unit", unit}, {"median", s.median}, {"p99", s.p99}, {"min", s.min},
          {"max", s.max}, {"n", s.n}};
}

// Writes `figures` (a JSON array) to `path` (nothing when `path` is empty); false on failure.
// For the benchmarks that print their own lines and keep their figures themselves.
inline bool WriteFigures(const std::string& path, const nlohmann::json& figures) {
  if (path.empty()) return true;
  std::ofstream out(path, std::ios::trunc);
  out << figures.dump(1) << "\n";
  return static_cast<bool>(out);
}

class BenchReport {
 public:
  // Prints the figure's line (with "(R x BASELINE)" when `baseline` names an earlier figure,
  // the ratio of the medians) and keeps it for Write.
  const Summary& Add(const std::string& name, const std::string& unit, std::vector<double> samples,
                     const std::string& baseline = "") {
    Summary s = Summarize(std::move(samples));
    std::printf("  %-50s median %10.2f  p99 %10.2f  min %10.2f  max %10.2f %s (n=%zu)",
                name.c_str(), s.median, s.p99, s.min, s.max, unit.c_str(), s.n);
    nlohmann::json j = FigureJson(name, unit, s);
    for (const auto& f : figures_) {
      if (f.first == baseline && f.second.median != 0) {
        const double ratio = s.median / f.second.median;
        std::printf("  %.2fx %s", ratio, baseline.c_str());
        j["baseline"] = baseline;
        j["ratio"] = ratio;
      }
    }
    std::printf("\n");
    json_.push_back(std::move(j));
    figures_.emplace_back(name, s);
    return figures_.back().second;
  }
  // Writes every figure as a JSON array to `path` (nothing when empty); false on failure.
  bool Write(const std::string& path) const { return WriteFigures(path, json_); }

 private:
  std::vector<std::pair<std::string, Summary>> figures_;
  nlohmann::json json_ = nlohmann::json::array();
};

}  // namespace edge::bench
