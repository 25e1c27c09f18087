#include "data/random.h"

#include <cmath>
#include <numbers>

namespace cg::data {

SampleRng::SampleRng(std::initializer_list<uint64_t> keys) {
  // Hash the keys in order; each step mixes, so nearby keys (index i, i+1) land far apart.
  uint64_t h = 0x243f6a8885a308d3ull;
  for (uint64_t k : keys) h = mix64(h ^ mix64(k + 0x9e3779b97f4a7c15ull));
  state_ = h;
}

double SampleRng::normal() {
  const double u1 = 1.0 - uniform(), u2 = uniform();  // u1 in (0, 1]: the log stays finite
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace cg::data
