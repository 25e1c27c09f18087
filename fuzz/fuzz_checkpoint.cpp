// Checkpoint loading: the safetensors reader (sizes, JSON header, offsets, checksum) and, on top,
// the training checkpoint's metadata (counters, optimizer, loss scale) and tensors matched against
// a tiny model. Any input is either loaded or rejected with cg::Error; anything else is a finding.
// The first input byte picks the path: even = load_checkpoint (model + optimizer), odd =
// safetensors::load alone followed by a save/load round trip of what it returned.
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
  cg::nn::Linear model{3, 2, gen};
  cg::nn::SGD opt{model.named_parameters(), {0.1f, 0.9f, 0.f, 0.f, false}};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string path = cg::fuzz::write_input("ckpt.safetensors", data + 1, size - 1);
  try {
    if (data[0] % 2 == 0) {
      Tiny tiny;
      cg::nn::load_checkpoint(path, tiny.model, tiny.opt);
    } else {
      const cg::safetensors::File file = cg::safetensors::load(path);
      // What was accepted must be writable and read back the same.
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
  } catch (const cg::Error&) {
  }
  return 0;
}
