// Fresh random inputs for kernel tests: standard-normal values, reproducible from a seed.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace cg::test {

template <typename T>
std::vector<T> random_vector(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist(0.0, 1.0);
  std::vector<T> v(n);
  for (auto& x : v) x = T(dist(gen));
  return v;
}

}  // namespace cg::test
