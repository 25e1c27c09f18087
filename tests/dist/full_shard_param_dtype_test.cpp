// dist.param_dtype (FSDP's MixedPrecision param_dtype) on real Gloo collectives, ranks as threads:
// the ring's all-gather moves 16-bit elements cut where a float32 bucket is; full_shard with bf16
// or fp16 gathers trains exactly as DDP does when every forward and backward sees the float32
// masters rounded to that type and the optimizer steps the masters (bit for bit at 2 ranks, where
// every sum is a + b), which is not what float32 gathers train; the gathers' trace says 2-byte
// elements; the strategies that never gather parameters refuse it.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "dist/ddp.h"
#include "engine/ops.h"
#include "nn/miniresnet.h"
#include "nn/optimizer.h"
#include "support/paths.h"
#include "support/rank_threads.h"
#include "support/rounded_parameters.h"
#include "support/state_values.h"
#include "support/tiny_batches.h"
#include "util/trace.h"

namespace cg::dist {
namespace {

TEST(ParamDType, The16BitAllGatherPutsEveryShardEverywhere) {
  for (int world : {2, 3}) {
    test::run_rank_threads(world, [&](int rank, ProcessGroup& group) {
      for (int64_t count : {3, 1001, 300001}) {
        const std::vector<int64_t> b = ring_shard_bounds(count, world);
        std::vector<uint16_t> want(static_cast<size_t>(count)), data(static_cast<size_t>(count), 0xffff);
        for (int r = 0; r < world; ++r)
          for (int64_t i = b[size_t(r)]; i < b[size_t(r) + 1]; ++i) want[size_t(i)] = uint16_t(r * 7919 + i);
        for (int64_t i = b[size_t(rank)]; i < b[size_t(rank) + 1]; ++i) data[size_t(i)] = want[size_t(i)];
        group.all_gather_shards_async(data.data(), count, sizeof(uint16_t))->wait();
        EXPECT_TRUE(data == want) << "rank " << rank << " of " << world << ", " << count << " elements";
      }
    });
  }
}

constexpr int kSteps = 3;

DdpOptions strategy(Sharding sharding, ParamDType param_dtype) {
  DdpOptions o;
  o.sharding = sharding;
  o.param_dtype = param_dtype;
  o.shard_units = [](const std::string&, nn::Module& m) { return nn::is_residual_block(m); };
  return o;
}

// Rank 0's weights after kSteps SGD steps with momentum on 2 ranks, each its 4 images a step.
// `round_to` (DDP only): each forward and backward runs on the masters rounded to that type, and
// the step updates the masters, as the reference for dist.param_dtype.
std::vector<float> trained(const DdpOptions& options, DType round_to = DType::f32) {
  std::vector<float> weights;
  test::run_rank_threads(2, [&](int rank, ProcessGroup& group) {
    Generator gen(0);
    nn::MiniResNet model(test::tiny_resnet(), gen);
    DistributedDataParallel ddp(model, group, options);
    nn::SGD sgd(model.named_parameters(), {0.1f, 0.9f, 0.f, 0.f, false});
    ddp.reducer().attach(sgd);
    for (int step = 0; step < kSteps; ++step) {
      test::RoundedParameters rounded(model, round_to);
      const int first = step * 8 + rank * 4;
      ops::cross_entropy(ddp(test::union_images(first, 4)), test::union_labels(first, 4)).backward();
      ddp.reducer().wait_for_gradients();
      rounded.restore();
      sgd.step(0.1);
      ddp.reducer().zero_grad();
    }
    std::vector<float> w = test::float_values(ddp.reducer().full_model_state(model));
    if (rank == 0) weights = std::move(w);
  });
  return weights;
}

TEST(ParamDType, FullShardWith16BitGathersTrainsAsDdpOnTheRoundedMasters) {
  for (const auto& [param_dtype, dtype] : {std::pair{ParamDType::bf16, DType::bf16}, {ParamDType::fp16, DType::f16}}) {
    SCOPED_TRACE(enum_name(param_dtype));
    const std::vector<float> sharded = trained(strategy(Sharding::full_shard, param_dtype));
    ASSERT_FALSE(sharded.empty());
    EXPECT_TRUE(sharded == trained(strategy(Sharding::no_shard, ParamDType::float32), dtype))
        << "not DDP on the masters rounded to " << enum_name(param_dtype);
    EXPECT_FALSE(sharded == trained(strategy(Sharding::full_shard, ParamDType::float32)))
        << "the same weights as float32 gathers: nothing was rounded";
  }
}

TEST(ParamDType, TheGathersMove2ByteElements) {
  const auto dir = test::make_temp_dir("param_dtype_trace");
  trace::clear();
  trace::set_enabled(true);
  trained(strategy(Sharding::full_shard, ParamDType::bf16));
  trace::set_enabled(false);
  trace::write_chrome_trace((dir / "trace.json").string(), 0);
  std::ifstream in(dir / "trace.json");
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("all_gather"), std::string::npos) << "no all-gather traced";
  EXPECT_NE(text.str().find("2-byte elements"), std::string::npos) << "the gathers moved float32";
}

TEST(ParamDType, StrategiesThatNeverGatherParametersRefuseIt) {
  for (Sharding s : {Sharding::no_shard, Sharding::optimizer, Sharding::shard_grad_op}) {
    test::run_rank_threads(2, [&](int, ProcessGroup& group) {
      Generator gen(0);
      nn::MiniResNet model(test::tiny_resnet(), gen);
      try {
        DistributedDataParallel ddp(model, group, strategy(s, ParamDType::bf16));
        ADD_FAILURE() << enum_name(s) << " accepted dist.param_dtype=bf16";
      } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("dist.param_dtype=bf16"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(enum_name(s)), std::string::npos) << e.what();
      }
    });
  }
}

}  // namespace
}  // namespace cg::dist
