// Counter-based randomness for data, the one definition shared by the host and the GPU: a generator
// is seeded by hashing a key such as (seed, rank, epoch, sample index, stream), so every random
// choice about a sample is a pure function of that key, whichever thread, worker or device makes
// it. The generator is splitmix64 (a Weyl sequence through a 64-bit mixer). Plain C++17 with
// __host__ __device__ under nvcc: data/random.h (the host API) and kernels/cuda/augment.cu (the
// GPU-resident feeder's batches) both include it, so their numbers cannot drift apart.
#pragma once
#include <cstdint>

#include "util/host_device.h"

namespace cg::rng {

inline constexpr uint64_t kWeylIncrement = 0x9e3779b97f4a7c15ull;  // splitmix64's, the golden ratio
inline constexpr uint64_t kHashStart = 0x243f6a8885a308d3ull;      // pi's fraction: any odd constant

// Stream tags: the same key used for different purposes must give unrelated numbers.
inline constexpr uint64_t kAugmentStream = 0xa06e1;
inline constexpr uint64_t kShuffleStream = 0x5f0ff1e;
inline constexpr uint64_t kSyntheticTemplateStream = 0x7e301a7e;
inline constexpr uint64_t kSyntheticSampleStream = 0x5a3b1e;

// splitmix64's output function: a bijection on 64-bit words that spreads every input bit.
CG_HOST_DEVICE inline uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class CounterRng {
 public:
  // Seed with add_key() for every key, in order: (1, 2) and (2, 1) give different streams. Each
  // step mixes, so nearby keys (index i, i+1) land far apart.
  CG_HOST_DEVICE void add_key(uint64_t key) { state_ = mix64(state_ ^ mix64(key + kWeylIncrement)); }

  CG_HOST_DEVICE uint64_t next() {
    state_ += kWeylIncrement;
    return mix64(state_);
  }
  // Uniform integer in [0, n) (by modulo: the bias, below n / 2^64, is far beneath notice here).
  CG_HOST_DEVICE uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  // Uniform double in [0, 1).
  CG_HOST_DEVICE double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }

 private:
  uint64_t state_ = kHashStart;
};

// A batch's augmentation as the GPU-resident feeder asks for it, from the engine's
// ops::gather_augment down to its kernel: the switches, and the (seed, rank, epoch) of the key.
struct BatchAugment {
  bool augment = false;  // off: a plain gather
  int crop_padding = 4;  // 0: no crop
  bool horizontal_flip = true;
  uint64_t seed = 0;
  int rank = 0;
  int64_t epoch = 0;
};

// The augmentation's choices for one sample (data/augment.h applies them).
struct AugmentDraw {
  int shift_y = 0, shift_x = 0;  // the crop window's offset from centre, in [-padding, padding]
  bool flip = false;
};

// The draws for the sample with dataset index `index`, keyed (seed, rank, epoch, index) in the
// augment stream: the crop's dy, then dx (when crop_padding > 0), then the flip (when enabled).
CG_HOST_DEVICE inline AugmentDraw draw_augment(uint64_t seed, int rank, int64_t epoch, int64_t index, int crop_padding,
                                               bool horizontal_flip) {
  CounterRng rng;
  rng.add_key(seed);
  rng.add_key(uint64_t(rank));
  rng.add_key(uint64_t(epoch));
  rng.add_key(uint64_t(index));
  rng.add_key(kAugmentStream);
  AugmentDraw d;
  if (crop_padding > 0) {
    const uint64_t choices = uint64_t(2 * crop_padding + 1);
    d.shift_y = int(rng.below(choices)) - crop_padding;
    d.shift_x = int(rng.below(choices)) - crop_padding;
  }
  if (horizontal_flip) d.flip = rng.uniform() < 0.5;
  return d;
}

}  // namespace cg::rng
