// ZeRO-1 and ZeRO-2 (dist.sharding=optimizer, shard_grad_op) on real Gloo collectives, ranks as
// threads: the reduce-scatter's shards are bit-for-bit the all-reduce's (so its blocks and order
// of additions are Gloo's ring's), the all-gather puts every shard everywhere, and DDP with either
// strategy trains SGD (momentum, Nesterov, weight decay) and AdamW (weight decay, a changing
// learning rate), gradient accumulation included, at 2, 3 and 4 ranks, to weights and gathered
// optimizer state bit-identical to unsharded DDP, holding about 1/world of the state, and under
// shard_grad_op about 1/world of the gradients between steps; with dist.grad_compression (fp16,
// bf16) the 16-bit reduce-scatter's shards are the 16-bit all-reduce's bit for bit, and sharded
// compressed training equals unsharded compressed DDP.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>

#include "dist/ddp.h"
#include "dist/overflow_agreement.h"
#include "dist/full_shard.h"
#include "dist/sharded_buckets.h"
#include "engine/ops.h"
#include "nn/grad_scaler.h"
#include "nn/miniresnet.h"
#include "nn/optimizer.h"
#include "support/rank_threads.h"
#include "support/tiny_batches.h"
#include "util/half.h"

namespace cg::dist {
namespace {


// Values of very different magnitudes, so that the order of additions shows in the last bits.
std::vector<float> random_values(int rank, int64_t count) {
  std::mt19937 gen(1234u + unsigned(rank));
  std::uniform_real_distribution<float> mantissa(-1.f, 1.f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  std::vector<float> v(static_cast<size_t>(count));
  for (auto& x : v) x = std::ldexp(mantissa(gen), exponent(gen));
  return v;
}

bool same_bits(const float* a, const float* b, int64_t n) { return std::memcmp(a, b, size_t(n) * sizeof(float)) == 0; }

TEST(RingShardBounds, CoverTheBufferInOrder) {
  for (int world : {1, 2, 3, 5})
    for (int64_t count : {0, 1, 2, 7, 1000, 262145, 700001}) {
      const auto b = ring_shard_bounds(count, world);
      ASSERT_EQ(b.size(), size_t(world) + 1);
      EXPECT_EQ(b.front(), 0);
      EXPECT_EQ(b.back(), count);
      for (int r = 0; r < world; ++r) EXPECT_LE(b[size_t(r)], b[size_t(r) + 1]) << count << " over " << world;
    }
  // 700001 floats (2.8 MB): 3 segments of at most 1 MiB, raised to 2 per rank (6), of 116667 floats.
  const auto b = ring_shard_bounds(700001, 3);
  EXPECT_EQ(b[1], 2 * 116667);
  EXPECT_EQ(b[2], 4 * 116667);
}

class ZeroWorld : public ::testing::TestWithParam<int> {};

// Sizes below, at and above Gloo's segment size, and tiny ones where blocks are empty.
TEST_P(ZeroWorld, ReduceScatterShardsAreTheAllReducesBitForBit) {
  const int world = GetParam();
  const std::vector<int64_t> counts{1, 2, 5, 1001, 262144, 600007};
  test::run_rank_threads(world, [&](int rank, ProcessGroup& group) {
    for (int64_t count : counts) {
      std::vector<float> reduced = random_values(rank, count), scattered = reduced;
      group.all_reduce_async(reduced.data(), count, ReduceOp::average)->wait();
      group.reduce_scatter_async(scattered.data(), count, ReduceOp::average)->wait();
      const auto b = ring_shard_bounds(count, world);
      const int64_t lo = b[size_t(rank)], n = b[size_t(rank) + 1] - lo;
      EXPECT_TRUE(same_bits(reduced.data() + lo, scattered.data() + lo, n))
          << "rank " << rank << ", " << count << " floats: its shard differs from the all-reduce";
    }
  });
}

TEST_P(ZeroWorld, AllGatherPutsEveryShardEverywhere) {
  const int world = GetParam();
  test::run_rank_threads(world, [&](int rank, ProcessGroup& group) {
    for (int64_t count : {3, 1001, 300001}) {
      const auto b = ring_shard_bounds(count, world);
      std::vector<float> want(static_cast<size_t>(count)), data(static_cast<size_t>(count), -1.f);
      for (int r = 0; r < world; ++r)
        for (int64_t i = b[size_t(r)]; i < b[size_t(r) + 1]; ++i) want[size_t(i)] = float(r * 1000003 + i);
      for (int64_t i = b[size_t(rank)]; i < b[size_t(rank) + 1]; ++i) data[size_t(i)] = want[size_t(i)];
      group.all_gather_shards_async(data.data(), count)->wait();
      EXPECT_TRUE(same_bits(want.data(), data.data(), count)) << "rank " << rank << ", " << count << " floats";
    }
  });
}

// ---- DDP sharded (optimizer, shard_grad_op) against unsharded DDP

constexpr int64_t kPerRank = 4;
enum class Opt { sgd, adamw };

struct RunResult {
  std::vector<uint8_t> weights;  // the state dict's bytes (full_shard: rank 0's, the buffers' elsewhere)
  nn::NamedTensors whole;        // the state dict, parameters whole (full_shard: on rank 0 only)
  nn::NamedTensors optimizer;    // unsharded: its state; sharded: gathered
  int64_t state_bytes = 0, owned = 0, total = 0;
  Reducer::Resident resident;    // after the last step
};

ShardedBuckets& sharded_of(DistributedDataParallel& ddp) { return dynamic_cast<ShardedBuckets&>(ddp.reducer()); }

std::vector<uint8_t> state_bytes(const nn::NamedTensors& state) {
  std::vector<uint8_t> out;
  for (auto& [name, t] : state) {
    if (!t.defined()) continue;
    const uint8_t* p = static_cast<const uint8_t*>(t.raw_data());
    out.insert(out.end(), p, p + t.nbytes());
  }
  return out;
}
std::vector<uint8_t> state_bytes(const nn::Module& m) { return state_bytes(m.state_dict()); }

bool is_residual_block(const std::string&, nn::Module& m) { return nn::is_residual_block(m); }

std::unique_ptr<nn::Optimizer> make(Opt which, const nn::Module& model) {
  if (which == Opt::sgd) return std::make_unique<nn::SGD>(model.named_parameters(), SgdOptions{0.05f, 0.9f, 1e-3f, 0.f, true});
  return std::make_unique<nn::AdamW>(model.named_parameters(), AdamWOptions{2e-3f, 0.9f, 0.99f, 1e-8f, 0.05f});
}

// `steps` optimizer steps of `accum` micro-batches each, the learning rate changing every step.
// With `compression`, gradients go over the wire in 16 bits (dist.grad_compression).
std::vector<RunResult> train(int world, Opt which, Sharding sharding, int steps, int accum,
                             GradCompression compression = GradCompression::none) {
  const bool sharded = sharding != Sharding::no_shard;
  std::vector<RunResult> out(static_cast<size_t>(world));
  test::run_rank_threads(world, [&](int rank, ProcessGroup& group) {
    Generator gen{static_cast<uint64_t>(rank)};
    nn::MiniResNet model(test::tiny_resnet(), gen);
    DdpOptions o;
    o.bucket_cap_mb = 0.004;  // several buckets, parameters cut across shards
    o.first_bucket_mb = 0.001;
    o.sharding = sharding;
    o.shard_units = is_residual_block;
    o.grad_compression = compression;
    DistributedDataParallel ddp(model, group, o);
    auto opt = make(which, model);
    ddp.reducer().attach(*opt);
    for (int step = 0; step < steps; ++step) {
      for (int micro = 0; micro < accum; ++micro) {
        const int64_t first = ((step * accum + micro) * world + rank) * kPerRank % 48;
        std::optional<DistributedDataParallel::NoSync> local;
        if (micro + 1 < accum) local.emplace(ddp.no_sync());
        ops::scale(ops::cross_entropy(ddp(test::union_images(first, kPerRank)), test::union_labels(first, kPerRank)),
                   1.0 / accum)
            .backward();
        local.reset();
        ddp.reducer().wait_for_gradients();
      }
      opt->step(0.05 * (1.0 - 0.1 * step));
      ddp.reducer().start_parameter_gather();
      ddp.reducer().zero_grad();
    }
    ddp.reducer().wait_for_parameters();
    if (sharded && sharding != Sharding::full_shard) {  // the last step all-gathered every bucket
      EXPECT_EQ(sharded_of(ddp).last_all_gathers().size(), ddp.reducer().buckets().size());
      for (const auto& w : sharded_of(ddp).last_all_gathers()) EXPECT_TRUE(w && w->done());
    }
    ddp.sync_buffers();
    RunResult& r = out[size_t(rank)];
    r.whole = ddp.reducer().full_model_state(model);
    r.weights = state_bytes(r.whole);
    r.optimizer = ddp.reducer().full_optimizer_state();
    r.state_bytes = opt->state_bytes();
    r.resident = ddp.reducer().resident_bytes();
    if (sharded && sharding != Sharding::full_shard) {
      r.owned = sharded_of(ddp).owned_elements();
      r.total = sharded_of(ddp).total_elements();
    }
  });
  return out;
}

void expect_same_state(const nn::NamedTensors& a, const nn::NamedTensors& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].first, b[i].first) << what;
    ASSERT_EQ(a[i].second.shape(), b[i].second.shape()) << what << " " << a[i].first;
    const Tensor x = a[i].second.to(DType::f32), y = b[i].second.to(DType::f32);
    EXPECT_TRUE(same_bits(x.data<float>(), y.data<float>(), x.numel())) << what << ": " << a[i].first << " differs";
  }
}

void expect_sharded_equals_unsharded(int world, Opt which, int accum,
                                     GradCompression compression = GradCompression::none,
                                     Sharding strategy = Sharding::optimizer) {
  const auto plain = train(world, which, Sharding::no_shard, 5, accum, compression);
  const auto zero = train(world, which, strategy, 5, accum, compression);
  for (int r = 0; r < world; ++r) {
    const RunResult &z = zero[size_t(r)], &p = plain[size_t(r)];
    EXPECT_TRUE(z.weights == p.weights) << "rank " << r << ": weights differ";
    expect_same_state(z.optimizer, p.optimizer, "rank " + std::to_string(r));
    // Each rank holds about 1/world of the state (shards of every bucket), the ranks all of it.
    const double share = double(z.state_bytes) / double(p.state_bytes);
    EXPECT_NEAR(share, 1.0 / world, 0.1) << "rank " << r << " holds " << z.state_bytes << " of " << p.state_bytes
                                         << " bytes";
    EXPECT_EQ(z.resident.optimizer_state, z.state_bytes);
    // shard_grad_op: between steps, about 1/world of the gradients too; ZeRO-1 keeps them whole.
    const double grads = double(z.resident.gradients) / double(p.resident.gradients);
    if (strategy == Sharding::shard_grad_op)
      EXPECT_NEAR(grads, 1.0 / world, 0.1) << "rank " << r << " holds " << z.resident.gradients << " of "
                                           << p.resident.gradients << " gradient bytes";
    else
      EXPECT_GE(grads, 1.0) << "rank " << r;
    EXPECT_GE(z.resident.parameters, p.resident.parameters) << "rank " << r << ": parameters are not sharded";
  }
  int64_t owned = 0;
  for (const auto& r : zero) owned += r.owned;
  EXPECT_EQ(owned, zero[0].total) << "the shards do not partition the parameters";
}

TEST_P(ZeroWorld, SgdNesterovMomentumIsBitIdenticalToUnsharded) { expect_sharded_equals_unsharded(GetParam(), Opt::sgd, 1); }
TEST_P(ZeroWorld, AdamWIsBitIdenticalToUnsharded) { expect_sharded_equals_unsharded(GetParam(), Opt::adamw, 1); }
TEST_P(ZeroWorld, GradientAccumulationIsBitIdenticalToUnsharded) {
  expect_sharded_equals_unsharded(GetParam(), Opt::adamw, 2);
}
TEST_P(ZeroWorld, ShardGradOpSgdIsBitIdenticalToUnshardedHoldingAShardOfTheGradients) {
  expect_sharded_equals_unsharded(GetParam(), Opt::sgd, 1, GradCompression::none, Sharding::shard_grad_op);
}
TEST_P(ZeroWorld, ShardGradOpAdamWWithAccumulationIsBitIdenticalToUnsharded) {
  expect_sharded_equals_unsharded(GetParam(), Opt::adamw, 2, GradCompression::none, Sharding::shard_grad_op);
}

// ---- FULL_SHARD (ZeRO-3) against DDP

// The largest relative L2 distance of a floating tensor of `a` from its namesake in `b`.
double largest_relative_distance(const nn::NamedTensors& a, const nn::NamedTensors& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].second.defined() || !is_floating(a[i].second.dtype())) continue;
    const std::vector<double> x = a[i].second.to(DType::f64).to_vector<double>();
    const std::vector<double> y = b[i].second.to(DType::f64).to_vector<double>();
    double diff = 0, norm = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      diff += (x[k] - y[k]) * (x[k] - y[k]);
      norm += y[k] * y[k];
    }
    if (norm > 0) worst = std::max(worst, std::sqrt(diff / norm));
  }
  return worst;
}

void expect_full_shard_matches_ddp(int world, Opt which, int accum) {
  const auto plain = train(world, which, Sharding::no_shard, 5, accum);
  const auto full = train(world, which, Sharding::full_shard, 5, accum);
  // Rank 0 holds the gathered copy. At 2 ranks a sum is a + b, the same bits in either order, so
  // the units' reduce-scatters give DDP's buckets' sums exactly; at more ranks the order of the
  // additions differs (units are not DDP's buckets): float32 rounding, far under PyTorch's own
  // spread between two float32 runs.
  if (world == 2) {
    EXPECT_TRUE(full[0].weights == plain[0].weights) << "weights differ from DDP's";
    expect_same_state(full[0].optimizer, plain[0].optimizer, "rank 0");
  } else {
    EXPECT_LT(largest_relative_distance(full[0].whole, plain[0].whole), 1e-5);
    EXPECT_LT(largest_relative_distance(full[0].optimizer, plain[0].optimizer), 1e-4);
  }
  for (int r = 0; r < world; ++r) {
    const RunResult &f = full[size_t(r)], &p = plain[size_t(r)];
    // Between steps a rank holds 1/world of each: parameters against DDP's flat gradient buffer,
    // which pads parameters to aligned offsets as the units' buffers do.
    const double w = 1.0 / world;
    EXPECT_LE(double(f.resident.parameters), 1.1 * w * double(p.resident.gradients)) << "rank " << r;
    EXPECT_NEAR(double(f.resident.gradients) / double(p.resident.gradients), w, 0.1) << "rank " << r;
    // A unit's shards are the ring's blocks, uneven for the tiny network's small units (0.14-0.36 of
    // the state at 4 ranks): each rank holds at most 1.5/world, and together exactly all of it.
    EXPECT_LE(double(f.state_bytes), 1.5 * w * double(p.state_bytes)) << "rank " << r;
    if (r > 0)  // no whole copy of a parameter but on rank 0
      for (const auto& [name, t] : f.whole)
        if (name.find("running") == std::string::npos && name.find("num_batches") == std::string::npos)
          EXPECT_FALSE(t.defined()) << "rank " << r << " holds a whole copy of " << name;
  }
  // Together all of it once, but for AdamW's step counter, which each rank holding part of a
  // parameter keeps (4 bytes; bounded by one per state-dict entry and rank).
  int64_t held = 0;
  for (const auto& f : full) held += f.state_bytes;
  EXPECT_GE(held, plain[0].state_bytes) << "the ranks' optimizer state does not cover DDP's";
  EXPECT_LE(held, plain[0].state_bytes + (which == Opt::adamw ? 4 * int64_t(plain[0].whole.size()) * world : 0))
      << "the ranks' optimizer state overlaps";
}

TEST_P(ZeroWorld, FullShardSgdNesterovMatchesDdp) { expect_full_shard_matches_ddp(GetParam(), Opt::sgd, 1); }
TEST_P(ZeroWorld, FullShardAdamWWithAccumulationMatchesDdp) {
  expect_full_shard_matches_ddp(GetParam(), Opt::adamw, 2);
}

// The prefetch, by the order things were issued in one step (no clock): in the forward, unit u's
// all-gather is issued when unit u - 1 starts computing and before unit u starts; in the
// backward, unit u's again when unit u + 1's backward starts and before its own. And the memory:
// after the forward only the root unit is held whole (the blocks freed theirs), after the
// backward none.
TEST(FullShard, EachGatherIsIssuedWhileThePreviousUnitComputes) {
  test::run_rank_threads(2, [&](int rank, ProcessGroup& group) {
    Generator gen(0);
    nn::MiniResNet model(test::tiny_resnet(), gen);
    DdpOptions o;
    o.sharding = Sharding::full_shard;
    o.shard_units = is_residual_block;
    DistributedDataParallel ddp(model, group, o);
    nn::SGD sgd(model.named_parameters(), {0.1f, 0.9f, 0.f, 0.f, false});
    ddp.reducer().attach(sgd);
    auto& full = dynamic_cast<FullShard&>(ddp.reducer());
    const size_t n = full.units().size();
    ASSERT_GE(n, 3u) << "the tiny network should have a root and at least two blocks";
    const int64_t at_rest = ddp.reducer().resident_bytes().parameters;
    const Tensor loss = ops::cross_entropy(ddp(test::union_images(rank * 4, 4)), test::union_labels(rank * 4, 4));
    EXPECT_EQ(ddp.reducer().resident_bytes().parameters, at_rest + full.units()[0].gathered_bytes)
        << "after the forward, more than the root unit is held whole";
    loss.backward();
    ddp.reducer().wait_for_gradients();
    EXPECT_EQ(ddp.reducer().resident_bytes().parameters, at_rest) << "a unit stayed gathered after the backward";
    const std::vector<std::string>& ev = full.events();
    auto at = [&](const std::string& e, size_t from = 0) {
      auto it = std::find(ev.begin() + std::ptrdiff_t(from), ev.end(), e);
      return it == ev.end() ? ev.size() : size_t(it - ev.begin());
    };
    const std::string order = fmt::format("{}", fmt::join(ev, " "));
    for (size_t u = 1; u < n; ++u) {
      const std::string g = fmt::format("g{}", u), f = fmt::format("f{}", u), prev = fmt::format("f{}", u - 1);
      EXPECT_LT(at(prev), at(g)) << order;
      EXPECT_LT(at(g), at(f)) << order;
      const size_t backward_gather = at(g, at(f) + 1);  // the second gather of unit u
      EXPECT_LT(backward_gather, at(fmt::format("b{}", u))) << order;
      EXPECT_LT(at(fmt::format("b{}", u + 1 < n ? u + 1 : 0)), backward_gather) << order;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, ZeroWorld, ::testing::Values(2, 3, 4));

// ---- ZeRO-1 with dist.grad_compression: the reduce-scatter is the first half of the 16-bit
// all-reduce, so a rank's shard holds the bits the compressed all-reduce gives there.

struct CompressedCase {
  int world;
  GradCompression compression;
};
void PrintTo(const CompressedCase& c, std::ostream* os) { *os << c.world << " ranks, " << enum_name(c.compression); }
std::string compressed_case_name(const ::testing::TestParamInfo<CompressedCase>& info) {
  return fmt::format("{}ranks_{}", info.param.world, enum_name(info.param.compression));
}
class ZeroCompressed : public ::testing::TestWithParam<CompressedCase> {};

uint16_t sixteen_bit(DType d, float v) { return d == DType::f16 ? Half(v).bits : BFloat16(v).bits; }

// The 16-bit reduce-scatter leaves on each rank exactly the chunk ZeRO-1 makes it own
// (ring_shard_bounds) summed to the all-reduce's bits, and the rest of the buffer untouched.
TEST_P(ZeroCompressed, The16BitReduceScattersShardIsThe16BitAllReducesBitForBit) {
  const auto [world, compression] = GetParam();
  const DType dtype = wire_dtype(compression);
  test::run_rank_threads(world, [&](int rank, ProcessGroup& group) {
    for (int64_t count : {int64_t(1), int64_t(5), int64_t(1001), int64_t(600007)}) {
      std::vector<uint16_t> input;
      for (float v : random_values(rank, count)) input.push_back(sixteen_bit(dtype, v));
      std::vector<uint16_t> reduced = input, scattered = input;
      group.all_reduce_16bit_async(reduced.data(), count, dtype, {})->wait();
      group.reduce_scatter_16bit_async(scattered.data(), count, dtype, {})->wait();
      const auto b = ring_shard_bounds(count, world);
      for (int64_t i = 0; i < count; ++i) {
        const bool mine = i >= b[size_t(rank)] && i < b[size_t(rank) + 1];
        ASSERT_EQ(scattered[size_t(i)], mine ? reduced[size_t(i)] : input[size_t(i)])
            << "rank " << rank << ", " << count << " values, element " << i << (mine ? " (its shard)" : " (not its)");
      }
    }
  });
}

std::vector<uint8_t> weights_of(const std::vector<RunResult>& runs) { return runs[0].weights; }

// Sharded and compressed against unsharded and compressed: weights and gathered optimizer state
// bit-identical on every rank, about 1/world of the state per rank; and unlike uncompressed
// training (so the compression did happen).
TEST_P(ZeroCompressed, SgdNesterovMomentumIsBitIdenticalToUnshardedCompressedDdp) {
  const auto [world, compression] = GetParam();
  expect_sharded_equals_unsharded(world, Opt::sgd, 1, compression);
  EXPECT_NE(weights_of(train(world, Opt::sgd, Sharding::optimizer, 5, 1, compression)),
            weights_of(train(world, Opt::sgd, Sharding::optimizer, 5, 1)))
      << "compressed and float32 sharded training gave the same weights";
}
TEST_P(ZeroCompressed, AdamWWithAccumulationIsBitIdenticalToUnshardedCompressedDdp) {
  const auto [world, compression] = GetParam();
  expect_sharded_equals_unsharded(world, Opt::adamw, 2, compression);
  expect_sharded_equals_unsharded(world, Opt::adamw, 2, compression, Sharding::shard_grad_op);
}

INSTANTIATE_TEST_SUITE_P(Wire, ZeroCompressed,
                         ::testing::Values(CompressedCase{2, GradCompression::fp16},
                                           CompressedCase{2, GradCompression::bf16},
                                           CompressedCase{3, GradCompression::fp16},
                                           CompressedCase{3, GradCompression::bf16}),
                         compressed_case_name);

// A transport with both halves but no 16-bit reduce-scatter refuses the combination by name at
// the first sharded step (the default of Wire16Collectives::reduce_scatter_sum).
TEST(Zero, ATransportWithoutA16BitReduceScatterRefusesNamingItself) {
  class NoCompressedReduceScatter : public GradientComm, public ShardCollectives, public Wire16Collectives {
   public:
    std::shared_ptr<Work> all_reduce_average(Tensor&, const Stream&, const std::string&) override { return done(); }
    Wire16Collectives* wire16() override { return this; }
    std::shared_ptr<Work> all_reduce_sum(Tensor&, const Stream&, const std::string&, WireStages) override {
      return done();
    }
    ShardCollectives* shards() override { return this; }
    std::vector<int64_t> shard_bounds(int64_t count) const override { return {0, count}; }
    std::shared_ptr<Work> reduce_scatter_average(Tensor&, const Stream&, const std::string&) override {
      return done();
    }
    std::shared_ptr<Work> all_gather_shards(Tensor&, const Stream&, const std::string&) override { return done(); }
    void wait(Work& work, const Stream&) override { work.wait(); }
    void broadcast(Tensor&, const Stream&) override {}
    void all_reduce_sum(double*, int64_t, const Stream&, const std::string&) override {}
    std::string name() const override { return "half-built test"; }
    int rank() const override { return 0; }
    int size() const override { return 1; }

   private:
    static std::shared_ptr<Work> done() {
      auto w = std::make_shared<Work>();
      w->finish();
      return w;
    }
  };
  Generator gen(0);
  nn::MiniResNet model(test::tiny_resnet(), gen);
  DdpOptions o;
  o.sharding = Sharding::optimizer;
  o.grad_compression = GradCompression::bf16;
  DistributedDataParallel ddp(model, std::make_unique<NoCompressedReduceScatter>(), o);
  nn::SGD sgd(model.named_parameters(), {0.1f, 0.f, 0.f, 0.f, false});
  ddp.reducer().attach(sgd);
  try {
    for (int step = 0; step < 2; ++step) {  // the first step all-reduces; the second reduce-scatters
      ops::cross_entropy(ddp(test::union_images(0, 2)), test::union_labels(0, 2)).backward();
      ddp.reducer().wait_for_gradients();
      ddp.reducer().zero_grad();
    }
    FAIL() << "a sharded compressed step ran without a 16-bit reduce-scatter";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("the half-built test transport has no 16-bit reduce-scatter"),
              std::string::npos)
        << e.what();
  }
}

// Mixed precision under sharding: an overflow in one rank's shard only (after the reduce-scatter,
// no other rank holds those sums) still makes every rank skip the step, through the scaler's
// agreement; the all-gather that follows leaves every replica as it was.
class ZeroStrategy : public ::testing::TestWithParam<Sharding> {};

TEST_P(ZeroStrategy, AnOverflowInOneRanksShardSkipsTheStepOnEveryRank) {
  std::vector<int> stepped(3, -1);
  std::vector<std::string> moved(3);
  test::run_rank_threads(3, [&](int rank, ProcessGroup& group) {
    Generator gen(0);
    nn::MiniResNet model(test::tiny_resnet(), gen);
    DdpOptions o;
    o.sharding = GetParam();
    DistributedDataParallel ddp(model, group, o);
    nn::SGD sgd(model.named_parameters(), {0.1f, 0.9f, 0.f, 0.f, false});
    ddp.reducer().attach(sgd);
    nn::GradScaler scaler;
    agree_on_overflow(scaler, ddp.comm());
    for (int step = 0; step < 2; ++step) {  // the first step is unsharded; the second is sharded
      scaler.backward(
          ops::cross_entropy(ddp(test::union_images(rank * kPerRank, kPerRank)), test::union_labels(0, kPerRank)));
      ddp.reducer().wait_for_gradients();
      if (step == 1 && rank == 2) {  // one element of rank 2's own shard, as the optimizer will read it
        const nn::NamedTensors owned = sgd.gradients();
        ASSERT_TRUE(sgd.sharded() && !owned.empty());
        owned.front().second.view_at(0, {1}).fill_(std::numeric_limits<double>::infinity());
      }
      const std::vector<uint8_t> before = state_bytes(model);
      const bool took = scaler.step(sgd, 0.1);
      ddp.reducer().start_parameter_gather();
      ddp.reducer().zero_grad();
      ddp.reducer().wait_for_parameters();
      if (step == 1) {
        stepped[size_t(rank)] = took ? 1 : 0;
        if (state_bytes(model) != before) moved[size_t(rank)] = "weights changed";
      }
    }
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(stepped[size_t(r)], 0) << "rank " << r << " stepped although rank 2's shard overflowed";
    EXPECT_EQ(moved[size_t(r)], "") << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, ZeroStrategy, ::testing::Values(Sharding::optimizer, Sharding::shard_grad_op),
                         [](const auto& info) { return std::string(enum_name(info.param)); });

// A transport without reduce-scatter and all-gather (as Gloo staged through host memory) refuses
// sharding when DDP is built, naming itself.
TEST(Zero, ATransportWithoutShardCollectivesRefusesNamingItself) {
  class AllReduceOnly : public GradientComm {
   public:
    std::shared_ptr<Work> all_reduce_average(Tensor&, const Stream&, const std::string&) override {
      auto w = std::make_shared<Work>();
      w->finish();
      return w;
    }
    void wait(Work& work, const Stream&) override { work.wait(); }
    void broadcast(Tensor&, const Stream&) override {}
    void all_reduce_sum(double*, int64_t, const Stream&, const std::string&) override {}
    std::string name() const override { return "all-reduce-only test transport"; }
    int rank() const override { return 0; }
    int size() const override { return 1; }
  };
  Generator gen(0);
  nn::MiniResNet model(test::tiny_resnet(), gen);
  DdpOptions o;
  for (Sharding s : {Sharding::optimizer, Sharding::shard_grad_op}) {
    o.sharding = s;
    try {
      DistributedDataParallel ddp(model, std::make_unique<AllReduceOnly>(), o);
      FAIL() << "sharding accepted over a transport without reduce-scatter";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("dist.sharding={}: the all-reduce-only test transport",
                                                       enum_name(s))),
                std::string::npos)
          << e.what();
    }
  }
  o.sharding = Sharding::no_shard;  // unsharded it is fine
  DistributedDataParallel plain(model, std::make_unique<AllReduceOnly>(), o);
}

// hybrid_shard shards over its node's ranks: DDP without that transport refuses it by name rather
// than running full_shard over the whole job.
TEST(Zero, HybridShardWithoutItsNodeTransportIsRefusedWhenDdpIsBuilt) {
  test::run_rank_threads(2, [&](int rank, ProcessGroup& group) {
    Generator gen(0);
    nn::MiniResNet model(test::tiny_resnet(), gen);
    DdpOptions o;
    o.sharding = Sharding::hybrid_shard;
    try {
      DistributedDataParallel ddp(model, group, o);
      ADD_FAILURE() << "hybrid_shard accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("dist.sharding=hybrid_shard needs its node's transport"), std::string::npos)
          << e.what();
    }
  });
}

TEST(Zero, AForwardWithoutAnAttachedOptimizerIsRefused) {
  test::run_rank_threads(2, [&](int rank, ProcessGroup& group) {
    Generator gen(0);
    nn::MiniResNet model(test::tiny_resnet(), gen);
    DdpOptions o;
    o.sharding = Sharding::shard_grad_op;
    DistributedDataParallel ddp(model, group, o);
    try {
      ddp(test::union_images(0, 2));
      ADD_FAILURE() << "forward ran without an optimizer to shard";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("attach(optimizer)"), std::string::npos) << e.what();
    }
  });
}

}  // namespace
}  // namespace cg::dist
