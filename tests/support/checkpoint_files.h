// What a checkpoint folder holds, as the fault tests see it: the newest checkpoint (by
// modification time, as the trainer picks after a restart), the atomic writer's temporaries
// (`.<name>.tmp.<pid>.XXXXXX`, util/atomic_file.cpp), and the step a checkpoint records.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

#include "util/safetensors.h"

namespace cg::test {

inline std::string newest_checkpoint(const std::filesystem::path& dir) {
  std::string best;
  std::filesystem::file_time_type best_time{};
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    if (best.empty() || e.last_write_time() > best_time) {
      best = e.path().string();
      best_time = e.last_write_time();
    }
  }
  return best;
}

// The temporaries in `dir`; those of the writer `pid` only when pid > 0.
inline int temporary_files(const std::filesystem::path& dir, long pid = 0) {
  const std::string mark = pid > 0 ? ".tmp." + std::to_string(pid) + "." : ".tmp.";
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.path().filename().string().find(mark) != std::string::npos;
  return n;
}

inline int64_t step_of(const std::string& checkpoint) {
  return std::stoll(safetensors::load(checkpoint).metadata.at("cudagrad.step"));
}

}  // namespace cg::test
