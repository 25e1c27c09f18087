// Training checkpoints as safetensors files. The model's state dict is stored under its own keys
// (so `load_state_dict(safetensors.torch.load_file(path))` works in PyTorch, extra keys aside);
// optimizer state under "optim.<state>.<param>"; counters, RNG state and the resolved config go in
// the string metadata. Writes are atomic and checksummed (util/safetensors), so a crash never
// leaves a half-written checkpoint and a corrupted one fails to load with a clear error.
#pragma once
#include <map>
#include <string>

#include "nn/module.h"
#include "nn/optimizer.h"
#include "util/safetensors.h"

namespace cg::nn {

// Where training stands: what a resumed run needs besides the tensors.
struct TrainingProgress {
  int64_t epoch = 0;           // the epoch in progress (0-based)
  int64_t batch_in_epoch = 0;  // batches of `epoch` already consumed
  int64_t step = 0;            // optimizer steps taken
  std::string optimizer;       // "sgd" | "adamw": resuming with another one is an error
  std::string rng_state;       // the trainer's generator
  std::string config_yaml;     // the resolved config of the run that wrote it
  double loss_scale = 0;       // fp16 mixed precision's GradScaler state; 0 = none
  int64_t loss_scale_growth_tracker = 0;
};

// optimizer_state: the optimizer's whole state when it holds only a shard of it (dist.sharding;
// gathered by dist::Reducer::full_optimizer_state), else null: its own state_tensors().
void save_checkpoint(const std::string& path, const Module& model, const Optimizer& optimizer,
                     const TrainingProgress& progress, const NamedTensors* optimizer_state = nullptr);
// The same with the model's state given whole (dist.sharding=full_shard gathers it unit by unit:
// dist::Reducer::full_model_state), in state_dict() order.
void save_checkpoint(const std::string& path, const NamedTensors& model_state, const Optimizer& optimizer,
                     const TrainingProgress& progress, const NamedTensors* optimizer_state = nullptr);

// Restores model (strict) and optimizer state; returns the saved progress. `path` is a checkpoint
// file, or a sharded checkpoint's folder (nn/sharded_checkpoint.h), assembled whole first.
TrainingProgress load_checkpoint(const std::string& path, Module& model, Optimizer& optimizer);

// A checkpoint's names for the optimizer's state: "optim.<state>.<param>".
inline constexpr const char* kOptimizerStatePrefix = "optim.";
// `t`'s values as safetensors stores them (GPU tensors copied out, waiting for the device).
safetensors::TensorRecord to_record(const Tensor& t);

// What a checkpoint holds, whole, whichever format it came from: the state dict, the optimizer's
// state ("<state>.<param>", without the file's "optim." prefix) and the string metadata.
struct CheckpointContents {
  std::map<std::string, Tensor> model, optimizer;
  std::map<std::string, std::string> metadata;
};
// The metadata save_checkpoint records: cudagrad.kind, the progress counters, the optimizer's name
// and steps, the generator's state, the resolved config, the loss scale.
std::map<std::string, std::string> progress_metadata(const Optimizer& optimizer, const TrainingProgress& progress);
// Checks all of `contents` against the model and the optimizer (kind, optimizer name, keys,
// shapes, dtypes, counters) before loading any of it, then loads it; `where` names the checkpoint
// in every error. Returns the saved progress.
TrainingProgress load_checkpoint_contents(const std::string& where, CheckpointContents contents, Module& model,
                                          Optimizer& optimizer);

// Reads a state dict from any safetensors file (a cudagrad checkpoint or one PyTorch wrote) and
// loads the model's keys from it, ignoring others; every model key must be present.
void load_model_weights(const std::string& path, Module& model);

}  // namespace cg::nn
