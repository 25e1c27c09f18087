// What a group restarted by cudagrad-launch --max-restarts must resume from: the newest checkpoint
// on disk when the launcher announces the restart. The old group is gone by then and the new one
// cannot have written yet (that takes it an epoch), so the test reads it at that moment and later
// compares it with the resume record the new generation left in metrics.jsonl.
#pragma once
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "support/checkpoint_files.h"
#include "support/processes.h"

namespace cg::test {

// Polls the launcher's `log` (every 5 ms, up to a minute) for restart number `k`'s notice; returns
// the newest checkpoint in `ckpts` then, or "" when the notice does not come.
inline std::string newest_checkpoint_at_restart(const std::filesystem::path& log, const std::filesystem::path& ckpts,
                                                int k) {
  const std::string notice = "restarting the group (" + std::to_string(k) + " of";
  for (int i = 0; i < 12000; ++i) {
    if (read_text(log).find(notice) != std::string::npos) return newest_checkpoint(ckpts);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return "";
}

}  // namespace cg::test
