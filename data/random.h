// Counter-based randomness for data: a generator is seeded by hashing a key such as (seed, rank,
// epoch, sample index, stream), so every random choice about a sample is a pure function of that
// key: it does not depend on which worker thread makes it, on the number of workers, or on what
// ran before. The generator is splitmix64 (a Weyl sequence through a 64-bit mixer).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace cg::data {

// splitmix64's output function: a bijection on 64-bit words that spreads every input bit.
inline uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Stream tags: the same key used for different purposes must give unrelated numbers.
inline constexpr uint64_t kAugmentStream = 0xa06e1;
inline constexpr uint64_t kShuffleStream = 0x5f0ff1e;
inline constexpr uint64_t kSyntheticTemplateStream = 0x7e301a7e;
inline constexpr uint64_t kSyntheticSampleStream = 0x5a3b1e;

class SampleRng {
 public:
  // Seeded from all the keys, in order: (1, 2) and (2, 1) give different streams.
  SampleRng(std::initializer_list<uint64_t> keys);
  template <typename... Keys>
    requires(std::is_integral_v<Keys> && ...)
  explicit SampleRng(Keys... keys) : SampleRng({uint64_t(keys)...}) {}

  uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ull;
    return mix64(state_);
  }
  // Uniform integer in [0, n) (by modulo: the bias, below n / 2^64, is far beneath notice here).
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  // Uniform double in [0, 1).
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
  // Standard normal (Box-Muller).
  double normal();

 private:
  uint64_t state_ = 0;
};

}  // namespace cg::data
