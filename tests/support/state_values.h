// A model's (or optimizer's) state as one vector of floats, for comparing whole runs with
// test::relative_l2 (support/tolerance.h).
#pragma once
#include <vector>

#include "nn/module.h"

namespace cg::test {

// The float32 tensors of `state`, end to end, in its order (undefined tensors, as full_shard hands
// ranks other than 0, and other dtypes left out).
inline std::vector<float> float_values(const nn::NamedTensors& state) {
  std::vector<float> all;
  for (const auto& [name, t] : state)
    if (t.defined() && t.dtype() == DType::f32) {
      const std::vector<float> v = t.to_vector<float>();
      all.insert(all.end(), v.begin(), v.end());
    }
  return all;
}

}  // namespace cg::test
