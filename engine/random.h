// Seeded random numbers for initialization and tests. The state round-trips through a string so
// checkpoints can restore it and a resumed run draws the same numbers as an uninterrupted one.
#pragma once
#include <cstdint>
#include <random>
#include <string>

#include "engine/tensor.h"

namespace cg {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : engine_(seed) {}
  void seed(uint64_t s) { engine_.seed(s); }
  std::mt19937_64& engine() { return engine_; }
  std::string state() const;
  void set_state(const std::string& state);

 private:
  std::mt19937_64 engine_;
};

// Fill a floating tensor in place (float32 or float64).
void normal_(Tensor& t, Generator& gen, double mean, double stddev);
void uniform_(Tensor& t, Generator& gen, double low, double high);

}  // namespace cg
