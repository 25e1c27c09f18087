#include "train/checkpoint_writer.h"

#include "nn/sharded_checkpoint.h"
#include "util/log.h"

namespace cg::train {
namespace fs = std::filesystem;
namespace {

std::string write_full(DistContext& dist, dist::Reducer* reducer, const nn::Module& model,
                       const nn::Optimizer& optimizer, const nn::TrainingProgress& progress, const fs::path& path) {
  // Every rank takes part in gathering the optimizer's state (and full_shard's parameters) whole.
  const nn::NamedTensors state = reducer ? reducer->full_optimizer_state() : optimizer.state_tensors();
  const nn::NamedTensors weights = reducer ? reducer->full_model_state(model) : model.state_dict();
  if (dist.rank() == 0) nn::save_checkpoint(path.string(), weights, optimizer, progress, &state);
  dist.barrier();  // no rank runs ahead (or reads it) before it is complete
  return path.string();
}

// The ranks whose flag in `table` (three slots a rank: failed, bytes, CRC) is set, as "1, 3".
std::string failed_ranks(const std::vector<double>& table) {
  std::string out;
  for (size_t r = 0; r < table.size() / 3; ++r)
    if (table[3 * r] != 0) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

// `writes`: whether this rank's pieces go in (not where another rank's are the same: hybrid_shard's
// other nodes, whose files stay empty).
std::string write_sharded(DistContext& dist, bool writes, const nn::Module& model, const nn::Optimizer& optimizer,
                          const nn::TrainingProgress& progress, const fs::path& folder) {
  const int rank = dist.rank(), world = dist.world_size();
  // Rank 0 numbers the save, so that no new file takes the name of one the current index lists.
  std::string generation = rank == 0 ? std::to_string(nn::next_generation(folder)) : "";
  dist.broadcast_from_rank0(generation);
  std::string error;
  nn::ShardFile mine;
  try {
    mine = nn::write_shard(folder, rank, world, std::stoll(generation),
                           writes ? nn::local_pieces(model, optimizer, rank, world) : std::vector<nn::StatePiece>{});
  } catch (const std::exception& e) {  // whatever it is, the other ranks must hear of it, not wait
    error = e.what();
  }
  // Every rank's outcome and file, each rank filling its own slots: sums of exact integers.
  std::vector<double> table(3 * size_t(world), 0.0);
  table[3 * rank] = error.empty() ? 0 : 1;
  table[3 * rank + 1] = double(mine.bytes);
  table[3 * rank + 2] = double(mine.crc);
  dist.all_reduce_sum(table);
  const std::string failed = failed_ranks(table);
  if (!failed.empty())
    throw Error(fmt::format("checkpoint {}: rank {} could not write its shard{}; no index was written, so the folder "
                            "still holds its previous checkpoint, if any",
                            folder.string(), failed, error.empty() ? " (its log says why)" : ": " + error));
  std::string index_error;
  if (rank == 0) {
    std::vector<nn::ShardFile> shards;
    for (int r = 0; r < world; ++r)
      shards.push_back({r, nn::shard_file_name(r, std::stoll(generation)), uint64_t(table[3 * r + 1]),
                        uint32_t(table[3 * r + 2])});
    try {
      nn::write_shard_index(folder, std::stoll(generation), shards, nn::progress_metadata(optimizer, progress));
    } catch (const std::exception& e) {
      index_error = e.what();
    }
  }
  // Also the barrier: no rank runs ahead (or reads the folder) before the index is in place.
  if (dist.any_rank(!index_error.empty()))
    throw Error(fmt::format("checkpoint {}: rank 0 could not write the index{}", folder.string(),
                            index_error.empty() ? " (its log says why)" : ": " + index_error));
  return folder.string();
}

}  // namespace

std::string checkpoint_file_name(const std::string& stem, CheckpointFormat format) {
  return stem + (format == CheckpointFormat::sharded ? nn::kShardedSuffix : ".safetensors");
}

std::string write_checkpoint(DistContext& dist, dist::Reducer* reducer, const nn::Module& model,
                             const nn::Optimizer& optimizer, const nn::TrainingProgress& progress, const fs::path& dir,
                             const std::string& stem, CheckpointFormat format) {
  if (reducer) reducer->wait_for_parameters();  // the step's all-gathers land first
  const fs::path path = dir / checkpoint_file_name(stem, format);
  const std::string written = format == CheckpointFormat::sharded
                                  ? write_sharded(dist, !reducer || reducer->writes_checkpoint_shard(), model,
                                                  optimizer, progress, path)
                                  : write_full(dist, reducer, model, optimizer, progress, path);
  if (dist.rank() == 0) log::info("checkpoint: {}", written);
  return written;
}

}  // namespace cg::train
