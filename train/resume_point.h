// Where a run resumes, agreed by every rank, with that checkpoint on every rank's own disk: ranks
// on nodes that share no file system must still resume from the same step, or every collective
// after it pairs the wrong tensors.
//
// Rank 0 decides, since it writes the checkpoints: checkpoint.resume_from when set, else after a
// restart by cudagrad-launch its newest checkpoint that verifies, among the trainer's own names
// (last.safetensors, epoch_<n>.safetensors, or those names' .shards folders) in its checkpoint folder: a newest one that is corrupt
// is skipped with a warning naming it and the one used instead, and other files there are never
// taken. Every other rank compares its own copy (the same path for resume_from, the same name in
// its checkpoint folder after a restart) with rank 0's by size and CRC-32; a rank without an
// identical copy (none, or a stale one from an earlier job) receives rank 0's bytes over the
// process group and writes them, atomically, where its copy belongs. When rank 0 cannot read the
// checkpoint it must resume from, every rank fails with the same error naming rank 0 and the path.
// A sharded checkpoint (a <name>.shards folder, nn/sharded_checkpoint.h) is found, verified and
// agreed on the same way, by its index: rank 0 checks every file the index names; a rank whose
// copy of the folder differs receives rank 0's files one by one, the index last.
#pragma once
#include <filesystem>
#include <string>

#include "train/distributed.h"
#include "train/train_config.h"

namespace cg::train {

// The checkpoint to load on this rank ("" when the run starts afresh). Collective: every rank
// calls it, with the same resume_from and restarted.
std::string agree_on_resume_checkpoint(DistContext& dist, const std::filesystem::path& checkpoint_dir,
                                       const std::string& resume_from, bool restarted);

// Where the trainer writes its checkpoints: checkpoint.dir, else <output.dir>/checkpoints.
std::filesystem::path checkpoint_dir(const TrainConfig& c);

// The checkpoint a training run resumes from, decided before anything else is built (""
// to start afresh): checkpoint.resume_from, refused at once on rank 0 when it is not a file (before
// seconds of data loading), or after a restart by cudagrad-launch rank 0's newest; then agreed by
// every rank with agree_on_resume_checkpoint. Collective.
std::string decide_resume(const TrainConfig& c, DistContext& dist);

}  // namespace cg::train
