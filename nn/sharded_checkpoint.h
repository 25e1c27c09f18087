// A training checkpoint as a folder that every rank writes its own part of (checkpoint.format=
// sharded; PyTorch FSDP's SHARDED_STATE_DICT saved with torch.distributed.checkpoint, DeepSpeed's
// per-rank ZeRO files), so that no rank ever gathers the whole model to save it:
//
//   <name>.shards/
//     rank<r>-gen<g>.safetensors  rank r's pieces of save number g: runs of elements of the
//                                 parameters and of the optimizer's state (under a sharding
//                                 strategy the slices this rank steps, else an even 1/W split of
//                                 each tensor), and from rank 0 the buffers (BatchNorm statistics)
//                                 whole. Written atomically and checksummed (util/safetensors.h).
//     index.json                  written last, by rank 0, once every rank's file is complete:
//                                 the generation, the world size that wrote it, each file with
//                                 its rank, size and CRC-32, and the progress metadata of a full
//                                 checkpoint (nn/checkpoint.h).
//
// A save that fails or is killed half-way leaves the previous index and the files it names
// untouched (new files carry the next generation's name; older generations' files are removed
// only after the new index is in place), so the folder always holds one complete checkpoint or
// none. Loading reads the index, checks every file it names (present, of its size and CRC) before
// reading any tensor, assembles each tensor whole from its pieces (which must tile it exactly) and
// goes through the full checkpoint's checks and loader: a sharded checkpoint resumes at any world
// size and under any strategy. Every rank reads every file: the ranks share a file system, or
// resume copies rank 0's files to the others (train/resume_point.h).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "nn/checkpoint.h"

namespace cg::nn {

inline constexpr const char* kShardedSuffix = ".shards";    // the folder: <name>.shards
inline constexpr const char* kShardIndexName = "index.json";  // its index, written last

// Elements [offset, offset + values.numel()) of the flattened tensor `name` (a state_dict key, or
// "optim.<state>.<param>" as in a full checkpoint), whose whole shape is `shape`.
struct StatePiece {
  std::string name;
  Shape shape;
  int64_t offset = 0;
  Tensor values;  // 1-D, or 0-d for a scalar written whole
};

// The pieces rank `rank` of `world_size` writes: of each parameter and its element-wise optimizer
// state, the slice the optimizer steps when it is sharded (nn::Optimizer::shard), else elements
// [n*rank/W, n*(rank+1)/W); a scalar state (a step counter) from the rank holding the parameter's
// first element; the buffers, whole, from rank 0. Never reads a parameter's own storage when the
// optimizer is sharded (under full_shard it is released between steps).
std::vector<StatePiece> local_pieces(const Module& model, const Optimizer& optimizer, int rank, int world_size);

// A rank's file as the index records it.
struct ShardFile {
  int rank = 0;
  std::string file;  // its name inside the folder
  uint64_t bytes = 0;
  uint32_t crc = 0;  // CRC-32 of the whole file
};

// Rank `rank`'s file of save number `generation`: "rank<r>-gen<g>.safetensors".
std::string shard_file_name(int rank, int64_t generation);
// The generation the next save into `folder` takes: one past its index's, 1 without an index.
int64_t next_generation(const std::filesystem::path& folder);
// Writes rank `rank`'s pieces into folder/rank<r>-gen<g>.safetensors, atomically (creating the
// folder); returns the file's entry for the index. Throws naming the file on any I/O error.
ShardFile write_shard(const std::filesystem::path& folder, int rank, int world_size, int64_t generation,
                      const std::vector<StatePiece>& pieces);
// Rank 0, after every rank's write_shard succeeded: the index (atomically), then every shard file
// of another generation removed.
void write_shard_index(const std::filesystem::path& folder, int64_t generation, const std::vector<ShardFile>& shards,
                       const std::map<std::string, std::string>& metadata);

// The index's entries as it lists them, the shard files not read (the index itself checked as
// verify_sharded_checkpoint checks it).
std::vector<ShardFile> shard_index(const std::filesystem::path& folder);
// Whether `path` is a folder holding a shard index (a complete sharded checkpoint, or a damaged one).
bool is_sharded_checkpoint(const std::filesystem::path& path);
// The index's entries, each file checked present with its recorded size and CRC-32. Throws naming
// the folder, the file and its rank on the first problem (no index, an unreadable or malformed
// index, a missing, truncated or altered shard).
std::vector<ShardFile> verify_sharded_checkpoint(const std::filesystem::path& folder);
// Every tensor whole, and the index's metadata: verified first, then each piece checked to lie
// inside its tensor, with one shape and dtype per tensor, and the pieces of each tensor tiling it
// without gap or overlap. Throws naming the folder, the tensor and the files; allocates nothing
// the caller keeps on failure.
CheckpointContents read_sharded_checkpoint(const std::filesystem::path& folder);

}  // namespace cg::nn
