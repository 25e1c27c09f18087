// Checkpoint loading: the safetensors reader (sizes, JSON header, offsets, checksum) and, on top,
// the training checkpoint's metadata (counters, optimizer, loss scale) and tensors matched against
// a tiny model, then one optimizer step, as a resumed run takes it: a loaded state tensor that
// does not fit its parameter is an out-of-bounds access there, which the sanitizers see. Any input
// is either loaded and stepped or rejected with cg::Error; anything else is a finding.
// The first input byte picks the path (byte % 3) and the optimizer (byte / 3 % 2: SGD, AdamW):
//   0: load_checkpoint on the file as it is (the checksum guards it);
//   1: safetensors::load alone, then a save/load round trip of what it returned;
//   2: safetensors::load, save again (a valid checksum over the fuzzed contents), then
//      load_checkpoint: what stands behind the checksum, reached without forging CRCs.
#include "engine/ops.h"
#include "engine/tensor.h"
#include "fuzz/fuzz_file.h"
#include "nn/checkpoint.h"
#include "nn/layers.h"
#include "nn/optimizer.h"
#include "util/check.h"
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string path = cg::fuzz::write_input("ckpt.safetensors", data + 1, size - 1);
  const bool adamw = data[0] / 3 % 2 == 1;
  try {
    switch (data[0] % 3) {
      case 0:
        resume_and_step(path, adamw);
        break;
      case 1:
        round_trip(path);
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
