// A tiny MiniResNet and deterministic batches for data-parallel tests: sample i of the "union
// batch" is the same whichever rank (and device) computes it, so per-rank gradients can be
// compared with single-process gradients over the union.
#pragma once
#include <cmath>
#include <vector>

#include "engine/tensor.h"
#include "nn/miniresnet.h"

namespace cg::test {

inline nn::MiniResNetOptions tiny_resnet() {
  nn::MiniResNetOptions o;
  o.in_channels = 2;
  o.widths = {4, 8};
  o.blocks = {1, 1};
  return o;
}

// Images first .. first + count - 1 of the union batch, [count, 2, 8, 8].
inline Tensor union_images(int64_t first, int64_t count) {
  Tensor x = Tensor::empty({count, 2, 8, 8});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(std::sin(double(i + first * 128) * 0.37));
  return x;
}

inline Tensor union_labels(int64_t first, int64_t count) {
  std::vector<int64_t> l;
  for (int64_t i = 0; i < count; ++i) l.push_back((first + i) * 3 % 10);
  return Tensor::from_vector(l, {count});
}

}  // namespace cg::test
