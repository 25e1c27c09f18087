// Checkpoint loading: the safetensors reader (sizes, JSON header, offsets, checksum) and, on top,
// the training checkpoint's metadata (counters, optimizer, loss scale) and tensors matched against
// a tiny model, then one optimizer step, as a resumed run takes it: a loaded state tensor that
// does not fit its parameter is an out-of-bounds access there, which the sanitizers see. Any input
// is either loaded and stepped or rejected with cg::Error; anything else is a finding.
// The first input byte b picks the path and the optimizer: for b % 8 < 6, path (b % 8) % 3 and
// optimizer (b % 8) / 3 (SGD, AdamW); for b % 8 of 6 and 7, path 3 with SGD and AdamW:
//   0: load_checkpoint on the file as it is (the checksum guards it);
//   1: safetensors::load alone, then a save/load round trip of what it returned;
//   2: safetensors::load, save again (a valid checksum over the fuzzed contents), then
//      load_checkpoint: what stands behind the checksum, reached without forging CRCs;
//   3: the same resealed file as rank 0's only shard of a sharded checkpoint (its kind set to a
//      shard's), beside an index naming it by its real size and CRC and carrying the file's own
//      cudagrad.* metadata as the progress: the pieces' recorded places, shapes, dtypes and
//      tiling (nn/sharded_checkpoint.h), where a crafted place would write out of bounds.
#include <filesystem>
#include <map>

#include "engine/ops.h"
#include "engine/tensor.h"
#include "fuzz/fuzz_file.h"
#include "nn/checkpoint.h"
#include "nn/layers.h"
#include "nn/sharded_checkpoint.h"
#include "nn/optimizer.h"
#include "util/check.h"
#include "util/file_bytes.h"
#include "util/safetensors.h"

namespace {

// A two-tensor model ("weight" [2,3], "bias" [2]): small, so that fuzzed headers can match it.
struct Tiny {
  cg::Generator gen{1};
  cg::nn::Linear model{cg::nn::LinearOptions{.in_features = 3, .out_features = 2}, gen};
};

std::unique_ptr<cg::nn::Optimizer> make_optimizer(bool adamw, Tiny& tiny) {
  if (adamw) return std::make_unique<cg::nn::AdamW>(tiny.model.named_parameters(), cg::AdamWOptions{});
  return std::make_unique<cg::nn::SGD>(tiny.model.named_parameters(), cg::SgdOptions{0.1f, 0.9f, 0.f, 0.f, false});
}

// Resumes from `path` and takes one training step through the loaded state.
void resume_and_step(const std::string& path, bool adamw) {
  Tiny tiny;
  std::unique_ptr<cg::nn::Optimizer> opt = make_optimizer(adamw, tiny);
  cg::nn::load_checkpoint(path, tiny.model, *opt);
  const cg::Tensor x = cg::Tensor::full({1, 3}, 0.5);
  cg::ops::cross_entropy(tiny.model(x), cg::Tensor::from_vector<int64_t>({1}, {1})).backward();
  opt->step(0.1);
}

// What was accepted must be writable and read back the same.
void round_trip(const std::string& path) {
  const cg::safetensors::File file = cg::safetensors::load(path);
  const std::string copy = (cg::fuzz::scratch_dir() / "copy.safetensors").string();
  cg::safetensors::save(copy, file);
  const cg::safetensors::File back = cg::safetensors::load(copy);
  if (back.tensors.size() != file.tensors.size()) __builtin_trap();
  for (size_t i = 0; i < file.tensors.size(); ++i) {
    const auto& [name, rec] = file.tensors[i];
    const auto& [name2, rec2] = back.tensors[i];
    if (name != name2 || rec.dtype != rec2.dtype || rec.shape != rec2.shape || rec.bytes != rec2.bytes)
      __builtin_trap();
  }
}

// The fuzzed file as a one-rank sharded checkpoint, resumed and stepped.
void resume_sharded_and_step(const std::string& path, bool adamw) {
  cg::safetensors::File file = cg::safetensors::load(path);
  file.metadata["cudagrad.kind"] = "training_checkpoint_shard";
  const std::filesystem::path folder = cg::fuzz::scratch_dir() / "ckpt.shards";
  const std::string shard = "rank0-gen1.safetensors";
  cg::safetensors::save((folder / shard).string(), file);
  const std::string bytes = cg::read_whole_file((folder / shard).string()).value_or("");
  const uint32_t crc = cg::crc32_of(bytes);
  std::map<std::string, std::string> progress;
  for (const auto& [key, value] : file.metadata)
    if (key.rfind("cudagrad.", 0) == 0 && key != "cudagrad.pieces") progress[key] = value;
  progress["cudagrad.kind"] = "training_checkpoint";
  cg::nn::write_shard_index(folder, 1, {{0, shard, bytes.size(), crc}}, progress);
  resume_and_step(folder.string(), adamw);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string path = cg::fuzz::write_input("ckpt.safetensors", data + 1, size - 1);
  const int pick = data[0] % 8;
  const bool adamw = pick < 6 ? pick / 3 == 1 : pick == 7;
  try {
    switch (pick < 6 ? pick % 3 : 3) {
      case 0:
        resume_and_step(path, adamw);
        break;
      case 1:
        round_trip(path);
        break;
      case 3:
        resume_sharded_and_step(path, adamw);
        break;
      default: {
        const std::string resealed = (cg::fuzz::scratch_dir() / "resealed.safetensors").string();
        cg::safetensors::save(resealed, cg::safetensors::load(path));
        resume_and_step(resealed, adamw);
      }
    }
  } catch (const cg::Error&) {
  }
  return 0;
}
