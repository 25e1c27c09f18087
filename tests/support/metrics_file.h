// Reading what cudagrad-train wrote: the records of one kind ("train", "eval", "event") of a run's
// metrics.jsonl, in the order written.
#pragma once
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace cg::test {

// `out_dir` is the run's output.dir; no file gives no records.
inline std::vector<nlohmann::json> metrics_records(const std::filesystem::path& out_dir, const std::string& kind) {
  std::vector<nlohmann::json> records;
  std::ifstream in(out_dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    if (j.value("kind", "") == kind) records.push_back(std::move(j));
  }
  return records;
}

}  // namespace cg::test
