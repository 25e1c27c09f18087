// What the CUDA-graph tests of the training step share (graphed_step_test, graphed_nccl_test):
// the same deterministic batches for a graphed and an eager run, and the bit-for-bit comparison
// of their losses.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "data/device_feeder.h"
#include "engine/random.h"
#include "engine/tensor.h"

namespace cg::test {

constexpr int64_t kBatch = 32, kSide = 16;

// `count` batches of kBatch normal 3 x kSide x kSide images on `device`; image j of batch i has
// label (j * label_step + i) % 10.
inline std::vector<data::DeviceBatch> step_batches(Device device, int count, int64_t label_step) {
  Generator gen(7);
  std::vector<data::DeviceBatch> out;
  for (int i = 0; i < count; ++i) {
    Tensor images = Tensor::empty({kBatch, 3, kSide, kSide});
    normal_(images, gen, 0.0, 1.0);
    std::vector<int64_t> labels(static_cast<size_t>(kBatch));
    for (int64_t j = 0; j < kBatch; ++j) labels[size_t(j)] = (j * label_step + i) % 10;
    out.push_back({images.to(device), Tensor::from_vector(labels, {kBatch}).to(device), kBatch});
  }
  return out;
}

// Every step's loss has the same bits in both runs.
inline void expect_same_losses(const std::vector<float>& eager, const std::vector<float>& graphed) {
  ASSERT_EQ(eager.size(), graphed.size());
  for (size_t s = 0; s < eager.size(); ++s)
    EXPECT_EQ(std::memcmp(&eager[s], &graphed[s], sizeof(float)), 0)
        << "step " << s << ": eager " << eager[s] << ", graphed " << graphed[s];
}

}  // namespace cg::test
