// DDP's flat layout (issue 24, item 3): every parameter of the ZeRO-1 flat parameter buffer (and
// of the flat gradient buffer) starts at a multiple of kFlatAlignmentBytes, so cuDNN's filter
// pointers are aligned as separately allocated tensors are; parameters do not overlap and each
// is covered whole; the padding between them belongs to no parameter, is not counted as one and
// stays zero through sharded training steps (reduce-scatter, shard update, all-gather).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>

#include "dist/ddp.h"
#include "dist/sharded_buckets.h"
#include "engine/ops.h"
#include "nn/miniresnet.h"
#include "nn/optimizer.h"
#include "support/rank_threads.h"
#include "support/tiny_batches.h"

namespace cg::dist {
namespace {

constexpr int64_t kPerRank = 4;

// Elements of `flat` that no parameter covers (offsets[i] .. offsets[i] + numel[i]).
std::vector<int64_t> padding_elements(const std::vector<int64_t>& offsets, const std::vector<int64_t>& numel,
                                      int64_t flat_size) {
  std::vector<char> covered(static_cast<size_t>(flat_size), 0);
  for (size_t i = 0; i < offsets.size(); ++i)
    std::fill_n(covered.begin() + offsets[i], numel[i], char(1));
  std::vector<int64_t> out;
  for (int64_t e = 0; e < flat_size; ++e)
    if (!covered[size_t(e)]) out.push_back(e);
  return out;
}

ShardedBuckets& sharded_of(DistributedDataParallel& ddp) { return dynamic_cast<ShardedBuckets&>(ddp.reducer()); }

// Checks the layout rules for the current buckets; returns the padding's element indices.
std::vector<int64_t> expect_aligned_layout(DistributedDataParallel& ddp, const nn::NamedTensors& params) {
  const std::vector<int64_t>& offsets = ddp.reducer().buckets().offsets();
  const Tensor& flat = sharded_of(ddp).flat_parameters();
  EXPECT_EQ(offsets.size(), params.size());
  std::vector<int64_t> numel;
  for (const auto& [name, p] : params) numel.push_back(p.numel());
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [name, p] = params[i];
    EXPECT_EQ(offsets[i] % kFlatAlignmentFloats, 0) << name << " starts at float " << offsets[i];
    EXPECT_LE(offsets[i] + numel[i], flat.numel()) << name << " runs past the flat buffer";
    // The parameter and its gradient really are views at that offset.
    EXPECT_EQ(static_cast<const float*>(p.raw_data()), flat.data<float>() + offsets[i]) << name;
    EXPECT_EQ(static_cast<const float*>(p.grad().raw_data()), ddp.reducer().buckets().flat().data<float>() + offsets[i]) << name;
    // In bytes: the flat buffer's base is the host allocator's 64-byte aligned block, so 64 here
    // (256 on a GPU, whose allocations are 256-byte aligned).
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p.raw_data()) % std::min<int64_t>(kFlatAlignmentBytes, 64), 0u) << name;
  }
  std::vector<size_t> by_offset(params.size());
  std::iota(by_offset.begin(), by_offset.end(), size_t(0));
  std::sort(by_offset.begin(), by_offset.end(), [&](size_t a, size_t b) { return offsets[a] < offsets[b]; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const size_t prev = by_offset[k - 1], next = by_offset[k];
    EXPECT_LE(offsets[prev] + numel[prev], offsets[next])
        << params[prev].first << " overlaps " << params[next].first;
  }
  return padding_elements(offsets, numel, flat.numel());
}

TEST(ZeroLayout, EveryParameterStartsAlignedAndThePaddingStaysZero) {
  std::vector<int64_t> owned(3, 0), total(3, 0);
  test::run_rank_threads(3, [&](int rank, ProcessGroup& group) {
    Generator gen{static_cast<uint64_t>(rank)};
    nn::MiniResNet model(test::tiny_resnet(), gen);
    DdpOptions o;
    o.bucket_cap_mb = 0.004;  // several buckets, parameters cut across shards
    o.first_bucket_mb = 0.001;
    o.sharding = Sharding::optimizer;
    DistributedDataParallel ddp(model, group, o);
    nn::AdamW opt(model.named_parameters(), AdamWOptions{2e-3f, 0.9f, 0.99f, 1e-8f, 0.05f});
    ddp.reducer().attach(opt);
    const nn::NamedTensors params = model.named_parameters();
    // Packed end to end, some parameter of this model would start unaligned: the check has teeth.
    int64_t packed = 0, unaligned_when_packed = 0;
    for (const auto& [name, p] : params) {
      unaligned_when_packed += packed % kFlatAlignmentFloats != 0;
      packed += p.numel();
    }
    ASSERT_GT(unaligned_when_packed, 0);
    std::vector<int64_t> padding = expect_aligned_layout(ddp, params);  // the first (unsharded) layout
    for (int step = 0; step < 3; ++step) {  // step 0 is plain DDP; the rebuild after it shards
      const int64_t first = (step * 3 + rank) * kPerRank % 48;
      ops::cross_entropy(ddp(test::union_images(first, kPerRank)), test::union_labels(first, kPerRank)).backward();
      ddp.reducer().wait_for_gradients();
      if (step > 0) padding = expect_aligned_layout(ddp, params);  // the rebuilt, sharded layout
      opt.step(0.05);
      ddp.reducer().start_parameter_gather();
      ddp.reducer().wait_for_parameters();
      ASSERT_FALSE(padding.empty()) << "a layout of this model without padding: nothing tested";
      const float* weights = sharded_of(ddp).flat_parameters().data<float>();
      const float* grads = ddp.reducer().buckets().flat().data<float>();
      for (int64_t e : padding) {
        ASSERT_EQ(weights[e], 0.f) << "rank " << rank << ", step " << step << ": padding element " << e;
        ASSERT_EQ(grads[e], 0.f) << "rank " << rank << ", step " << step << ": padding element " << e;
      }
      ddp.reducer().zero_grad();
    }
    for (const auto& [name, p] : params) total[size_t(rank)] += p.numel();
    EXPECT_EQ(sharded_of(ddp).total_elements(), total[size_t(rank)]);
    owned[size_t(rank)] = sharded_of(ddp).owned_elements();
  });
  // The padding is nobody's: the ranks' shards add up to the model's parameters, no more.
  EXPECT_EQ(owned[0] + owned[1] + owned[2], total[0]);
}

}  // namespace
}  // namespace cg::dist
