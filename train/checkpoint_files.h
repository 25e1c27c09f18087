// The checkpoint files a run finds on disk: whether cudagrad-launch restarted this process and,
// if so, the newest checkpoint to resume from; and the weights' fingerprint that the replicas'
// end-of-run check compares.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "nn/module.h"
#include "nn/optimizer.h"

namespace cg::train {

// cudagrad-launch --max-restarts sets CUDAGRAD_RESTART=n for the n-th restart of the group.
bool restarted_by_launcher();
// The trainer's own checkpoints in dir (last.safetensors, epoch_<n>.safetensors, and the folders
// last.shards, epoch_<n>.shards; other files are never taken for one), newest first by modification time: what a restarted group may resume from
// (train/resume_point.h), on rank 0, which wrote them all.
std::vector<std::filesystem::path> trainer_checkpoints(const std::filesystem::path& dir);
// The newest of them ("" when there is none).
std::string latest_checkpoint(const std::filesystem::path& dir);
// CRC-32 of every state-dict tensor's bytes: equal weights, equal fingerprints.
uint32_t state_fingerprint(const nn::Module& model);
uint32_t state_fingerprint(const nn::NamedTensors& state);
// The same over the model's and then the optimizer's state: what replicas compare after a resume.
uint32_t state_fingerprint(const nn::Module& model, const nn::Optimizer& optimizer);

}  // namespace cg::train
