// Counter-based randomness for data: a generator is seeded by hashing a key such as (seed, rank,
// epoch, sample index, stream), so every random choice about a sample is a pure function of that
// key: it does not depend on which worker thread makes it, on the number of workers, or on what
// ran before. The generator and the stream tags are util/counter_rng.h's, which the GPU's batch
// builder shares.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "util/counter_rng.h"

namespace cg::data {

using rng::kAugmentStream;
using rng::kShuffleStream;
using rng::kSyntheticSampleStream;
using rng::kSyntheticTemplateStream;
using rng::mix64;

class SampleRng {
 public:
  // Seeded from all the keys, in order: (1, 2) and (2, 1) give different streams.
  SampleRng(std::initializer_list<uint64_t> keys) {
    for (uint64_t k : keys) rng_.add_key(k);
  }
  template <typename... Keys>
    requires(std::is_integral_v<Keys> && ...)
  explicit SampleRng(Keys... keys) : SampleRng({uint64_t(keys)...}) {}

  uint64_t next() { return rng_.next(); }
  // Uniform integer in [0, n) (by modulo: the bias, below n / 2^64, is far beneath notice here).
  uint64_t below(uint64_t n) { return rng_.below(n); }
  // Uniform double in [0, 1).
  double uniform() { return rng_.uniform(); }
  // Standard normal (Box-Muller).
  double normal();

 private:
  rng::CounterRng rng_;
};

}  // namespace cg::data
