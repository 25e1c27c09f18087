// Reading what cudagrad-train wrote: the records of one kind ("train", "eval", "event", "resume")
// of a run's metrics.jsonl, in the order written; and where each resumed run took over.
#pragma once
#include <filesystem>
#include <fstream>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>
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

// One "resume" record (a run that loaded a checkpoint, appending to the file) and what followed it.
struct Resumption {
  std::string from;                 // the checkpoint it loaded
  int64_t step = -1;                // the step it resumed at
  int64_t first_train_step = -1;    // the step of the first "train" record after it (-1: none)
};

// Every resumption in `out_dir`'s metrics.jsonl, in order. A trainer that ignored its checkpoint
// writes none (and truncates the file), so this is the evidence that a resume happened.
inline std::vector<Resumption> resumptions(const std::filesystem::path& out_dir) {
  std::vector<Resumption> found;
  std::ifstream in(out_dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    const std::string kind = j.value("kind", "");
    if (kind == "resume") found.push_back({j.at("from"), j.at("step"), -1});
    else if (kind == "train" && !found.empty() && found.back().first_train_step < 0)
      found.back().first_train_step = j.at("step");
  }
  return found;
}

// The evidence that a run resumed from `checkpoint` (whose step the caller read from it): exactly
// one resume record, naming it, at its step, with training going on after it. A trainer that
// ignored checkpoint.resume_from and trained afresh could reach the same accuracy, but writes no
// such record (and truncates the file).
inline ::testing::AssertionResult resumed_once_from(const std::filesystem::path& out_dir, const std::string& checkpoint,
                                                    int64_t step) {
  const std::vector<Resumption> r = resumptions(out_dir);
  if (r.size() != 1) return ::testing::AssertionFailure() << r.size() << " resume records, not 1";
  if (r[0].from != checkpoint) return ::testing::AssertionFailure() << "resumed from " << r[0].from;
  if (r[0].step != step) return ::testing::AssertionFailure() << "resumed at step " << r[0].step << ", not " << step;
  if (r[0].first_train_step <= step)
    return ::testing::AssertionFailure() << "no training after the resume (first train record at step "
                                         << r[0].first_train_step << ")";
  return ::testing::AssertionSuccess();
}

}  // namespace cg::test
