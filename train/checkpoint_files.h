// The checkpoint files a run finds on disk: whether cudagrad-launch restarted this process and,
// if so, the newest checkpoint to resume from; and the weights' fingerprint that the replicas'
// end-of-run check compares.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

#include "nn/module.h"

namespace cg::train {

// cudagrad-launch --max-restarts sets CUDAGRAD_RESTART=n for the n-th restart of the group.
bool restarted_by_launcher();
// The newest checkpoint in dir ("" when there is none): where a restarted group resumes.
std::string latest_checkpoint(const std::filesystem::path& dir);
// CRC-32 of every state-dict tensor's bytes: equal weights, equal fingerprints.
uint32_t state_fingerprint(const nn::Module& model);

}  // namespace cg::train
