// The trainer's checkpoint, written in the format checkpoint.format names, every rank taking part:
//   full     <name>.safetensors, written by rank 0 alone: the parameters (under full_shard
//            gathered unit by unit, copied on rank 0 only) and the optimizer's state gathered
//            whole (nn/checkpoint.h). PyTorch loads it.
//   sharded  <name>.shards/: every rank writes its own pieces of the parameters and the
//            optimizer's state (the slices it steps under a sharding strategy), then rank 0 the
//            index, only once every rank's file is complete (nn/sharded_checkpoint.h). Nothing is
//            gathered. A rank that cannot write its file fails the save on every rank, naming it,
//            and the folder keeps its previous checkpoint.
#pragma once
#include <filesystem>
#include <string>

#include "dist/reducer.h"
#include "nn/checkpoint.h"
#include "train/distributed.h"
#include "train/train_config.h"

namespace cg::train {

// What a checkpoint called `stem` ("last", "epoch_3") is named on disk in `format`.
std::string checkpoint_file_name(const std::string& stem, CheckpointFormat format);

// Writes dir/<stem>.safetensors or dir/<stem>.shards and returns its path. `reducer` is the
// data-parallel wrapper's (null with one process). Collective: every rank calls it.
std::string write_checkpoint(DistContext& dist, dist::Reducer* reducer, const nn::Module& model,
                             const nn::Optimizer& optimizer, const nn::TrainingProgress& progress,
                             const std::filesystem::path& dir, const std::string& stem, CheckpointFormat format);

}  // namespace cg::train
