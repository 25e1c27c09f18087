// Counter-based randomness for data: every random choice about a sample is a pure function of
// (seed, rank, epoch, index), so it does not depend on which worker thread makes it, on the
// number of workers, or on what ran before. splitmix64 mixes the key into well-spread bits.
#pragma once
#include <cstdint>

namespace cg::data {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A small generator seeded from several keys.
class SampleRng {
 public:
  SampleRng(uint64_t a, uint64_t b = 0, uint64_t c = 0, uint64_t d = 0)
      : state_(splitmix64(splitmix64(splitmix64(splitmix64(a) ^ b) ^ c) ^ d)) {}
  uint64_t next() { return state_ = splitmix64(state_); }
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  // Uniform double in [0, 1).
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
  // Standard normal (Box-Muller).
  double normal();

 private:
  uint64_t state_;
};

}  // namespace cg::data
