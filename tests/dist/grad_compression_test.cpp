// dist.grad_compression on real Gloo collectives (ranks as threads of this process, each with its
// own store client, process group and TCP connections): the 16-bit sum over the wire adds in rank
// order rounding after every addition and leaves every rank the same bits; DDP's reduced
// gradients equal, bit for bit, a reference that applies the compression (divide by W in float32,
// then cast, unlike PyTorch's stock hook which casts first) step by step to each rank's own
// gradients; the transport equals that arithmetic done by PyTorch's own ops in /usr/bin/python3,
// and differs from PyTorch's stock fp16_compress_hook where it should (an fp16 overflow the hook
// has and we have not; last bits); the bytes reported per step are half of float32's; the
// transports without a 16-bit path refuse the key by name; the modeled backend times 16-bit bytes,
// for the all-reduce and for ZeRO-1's reduce-scatter.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <limits>

#include "dist/ddp.h"
#include "dist/overflow_agreement.h"
#include "engine/ops.h"
#include "nn/grad_scaler.h"
#include "nn/optimizer.h"
#include "nn/miniresnet.h"
#include "support/rank_threads.h"
#include "support/paths.h"
#include "support/random_data.h"
#include "support/tiny_batches.h"
#include "support/need_tool.h"
#include "util/half.h"

namespace cg::dist {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kPerRank = 6;


// The reference's 16-bit arithmetic, from util/half.h's conversions (round to nearest even).
template <typename T>
uint16_t to16(float v) {
  return T(v).bits;
}
template <typename T>
float from16(uint16_t bits) {
  T t;
  t.bits = bits;
  return float(t);
}
uint16_t round16(DType d, float v) { return d == DType::f16 ? to16<Half>(v) : to16<BFloat16>(v); }
float widen(DType d, uint16_t b) { return d == DType::f16 ? from16<Half>(b) : from16<BFloat16>(b); }

// The compression, element by element: c_r = round16(g_r * (1/W)), divided in float32 before
// the cast; the wire adds the c_r in rank order, rounding to 16 bits after each addition; the
// result is widened back to float32.
float compression_reference(DType d, const std::vector<float>& per_rank) {
  const int world = int(per_rank.size());
  uint16_t sum = 0;
  for (int r = 0; r < world; ++r) {
    const uint16_t c = round16(d, per_rank[size_t(r)] * (1.0f / float(world)));
    sum = r == 0 ? c : round16(d, widen(d, sum) + widen(d, c));
  }
  return widen(d, sum);
}

struct WireCase {
  int world;
  DType dtype;
};
std::string case_name(const ::testing::TestParamInfo<WireCase>& info) {
  return fmt::format("{}ranks_{}", info.param.world, dtype_name(info.param.dtype));
}

class Compressed : public ::testing::TestWithParam<WireCase> {};

TEST_P(Compressed, WireSumAddsInRankOrderAndEveryRankGetsTheSameBits) {
  const auto [world, dtype] = GetParam();
  // Sizes below, at and above the world size, uneven chunks; values whose sums round.
  for (int64_t count : {int64_t(1), int64_t(world), int64_t(1000), int64_t(4099)}) {
    std::vector<std::vector<uint16_t>> inputs(static_cast<size_t>(world)), outputs(static_cast<size_t>(world));
    for (int r = 0; r < world; ++r) {
      const std::vector<float> v = test::random_vector<float>(size_t(count), uint64_t(100 + r));
      for (float x : v) inputs[size_t(r)].push_back(round16(dtype, x * float(1 << (r * 3))));  // mixed magnitudes
    }
    test::run_rank_threads(world, [&](int rank, ProcessGroup& group) {
      std::vector<uint16_t> data = inputs[size_t(rank)];
      group.all_reduce_16bit_async(data.data(), count, dtype, {})->wait();
      outputs[size_t(rank)] = data;
    });
    int rounded = 0;
    for (int64_t i = 0; i < count; ++i) {
      uint16_t want = inputs[0][size_t(i)];
      double exact = widen(dtype, want);
      for (int r = 1; r < world; ++r) {
        want = round16(dtype, widen(dtype, want) + widen(dtype, inputs[size_t(r)][size_t(i)]));
        exact += widen(dtype, inputs[size_t(r)][size_t(i)]);
      }
      rounded += double(widen(dtype, want)) != exact;
      for (int r = 0; r < world; ++r)
        ASSERT_EQ(outputs[size_t(r)][size_t(i)], want) << "count " << count << " rank " << r << " element " << i;
    }
    if (count >= 1000) {
      EXPECT_GT(rounded, 10) << "no sum needed rounding: the check could not tell orders apart";
    }
  }
}

std::vector<float> flat_grads(const nn::Module& m) {
  std::vector<float> out;
  for (auto& [name, p] : m.named_parameters()) {
    auto g = p.grad().to_vector<float>();
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}

// Each rank's own gradient, computed alone from rank 0's initial weights (seed 0), BN in eval
// mode so that it depends on the rank's batch only.
std::vector<float> local_gradient(int rank) {
  Generator gen(0);
  nn::MiniResNet model(test::tiny_resnet(), gen);
  model.eval();
  ops::cross_entropy(model(test::union_images(rank * kPerRank, kPerRank)),
                     test::union_labels(rank * kPerRank, kPerRank))
      .backward();
  return flat_grads(model);
}

TEST_P(Compressed, DdpGradientsEqualTheCompressionAppliedToEachRanksGradient) {
  const auto [world, dtype] = GetParam();
  std::vector<std::vector<float>> local(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) local[size_t(r)] = local_gradient(r);
  std::vector<std::vector<float>> got(static_cast<size_t>(world));
  std::vector<std::vector<size_t>> bytes(static_cast<size_t>(world)), plain_bytes(static_cast<size_t>(world));
  test::run_rank_threads(world, [&](int rank, ProcessGroup& group) {
    Generator gen{static_cast<uint64_t>(rank)};  // DDP must broadcast rank 0's weights
    nn::MiniResNet model(test::tiny_resnet(), gen);
    model.eval();
    DdpOptions o;
    o.bucket_cap_mb = 0.002;  // several buckets, of sizes not divisible by the world size
    o.first_bucket_mb = 0.0005;
    o.grad_compression = dtype == DType::f16 ? GradCompression::fp16 : GradCompression::bf16;
    DistributedDataParallel ddp(model, group, o);
    EXPECT_GT(ddp.reducer().buckets().size(), 2u);
    ops::cross_entropy(ddp(test::union_images(rank * kPerRank, kPerRank)),
                       test::union_labels(rank * kPerRank, kPerRank))
        .backward();
    ddp.reducer().wait_for_gradients();
    got[size_t(rank)] = flat_grads(model);
    bytes[size_t(rank)] = ddp.reducer().buckets().bytes_per_bucket();
    o.grad_compression = GradCompression::none;
    DistributedDataParallel plain(model, group, o);
    plain_bytes[size_t(rank)] = plain.reducer().buckets().bytes_per_bucket();
  });
  const size_t n = local[0].size();
  int differs_from_float32 = 0;
  for (size_t i = 0; i < n; ++i) {
    std::vector<float> per_rank;
    double average = 0;
    for (int r = 0; r < world; ++r) {
      per_rank.push_back(local[size_t(r)][i]);
      average += local[size_t(r)][i] / double(world);
    }
    const float want = compression_reference(dtype, per_rank);
    differs_from_float32 += double(want) != double(float(average));
    for (int r = 0; r < world; ++r) {
      ASSERT_EQ(got[size_t(r)].size(), n);
      ASSERT_EQ(std::memcmp(&got[size_t(r)][i], &want, 4), 0)
          << "rank " << r << " element " << i << ": " << got[size_t(r)][i] << ", the reference gives " << want;
    }
  }
  EXPECT_GT(differs_from_float32, int(n / 4)) << "the gradients look uncompressed";
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(bytes[size_t(r)].size(), plain_bytes[size_t(r)].size());
    for (size_t b = 0; b < bytes[size_t(r)].size(); ++b) EXPECT_EQ(2 * bytes[size_t(r)][b], plain_bytes[size_t(r)][b]);
  }
}

INSTANTIATE_TEST_SUITE_P(Wire, Compressed,
                         ::testing::Values(WireCase{2, DType::f16}, WireCase{2, DType::bf16}, WireCase{3, DType::f16},
                                           WireCase{3, DType::bf16}),
                         case_name);

// The real thing in PyTorch (tests/golden/compress_hook_reference.py): the host Gloo transport's
// compressed all-reduce equals, bit for bit, PyTorch's own ops doing the same arithmetic (float32
// multiplication by 1/W, `.to(float16 / bfloat16)`, rank-order 16-bit sum, cast back), on values
// spanning fp16's subnormals to past its range. And against PyTorch's stock fp16/bf16_compress_hook
// (default_hooks.py), which casts before dividing, the difference is as documented: one rank's
// 65504 * 1.5 is infinity in the hook's fp16 and finite here; elsewhere a few last bits.

std::vector<float> read_floats(const fs::path& file, int64_t count) {
  std::vector<float> v(static_cast<size_t>(count));
  std::ifstream in(file, std::ios::binary);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(v.size() * sizeof(float)));
  EXPECT_TRUE(in) << "short output in " << file;
  return v;
}

TEST_P(Compressed, HostGlooMatchesPyTorchDividingFirstAndDiffersFromItsStockHookAsDocumented) {
  NEED_TOOL(test::missing_python_module("torch", "Debian's python3-torch"));
  const auto [world, dtype] = GetParam();
  const int64_t count = 6007;
  const float beyond_fp16 = 65504.f * 1.5f;
  std::vector<float> all;  // rank after rank
  for (int r = 0; r < world; ++r) {
    std::vector<float> v = test::random_vector<float>(size_t(count), uint64_t(40 + r));
    for (size_t i = 0; i < v.size(); ++i) v[i] *= std::pow(10.0f, float(int(i % 13) - 8));  // 1e-8 .. 1e4
    v[size_t(r)] = beyond_fp16;  // element r: on rank r only
    all.insert(all.end(), v.begin(), v.end());
  }
  const fs::path dir = test::make_temp_dir("hook_golden");
  {
    std::ofstream in(dir / "in.bin", std::ios::binary);
    in.write(reinterpret_cast<const char*>(all.data()), std::streamsize(all.size() * sizeof(float)));
  }
  const std::string script = (test::source_dir() / "tests/golden/compress_hook_reference.py").string();
  const std::string cmd = "/usr/bin/python3 " + script + (dtype == DType::f16 ? " fp16 " : " bf16 ") +
                          std::to_string(world) + " " + std::to_string(count) + " " + (dir / "in.bin").string() + " " +
                          (dir / "divide_first.bin").string() + " " + (dir / "stock_hook.bin").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::vector<float> want = read_floats(dir / "divide_first.bin", count);
  const std::vector<float> stock = read_floats(dir / "stock_hook.bin", count);

  std::vector<std::vector<float>> got(static_cast<size_t>(world));
  test::run_rank_threads(world, [&](int rank, ProcessGroup& group) {
    auto transport = make_host_gloo_comm(group);
    auto comm = make_compressed_comm(*transport, dtype == DType::f16 ? GradCompression::fp16 : GradCompression::bf16);
    const std::vector<float> mine(all.begin() + rank * count, all.begin() + (rank + 1) * count);
    Tensor bucket = Tensor::from_vector(mine, {count});
    auto work = comm->all_reduce_average(bucket, Stream(), "golden bucket");
    comm->wait(*work, Stream());
    got[size_t(rank)] = bucket.to_vector<float>();
  });
  for (int r = 0; r < world; ++r)
    for (int64_t i = 0; i < count; ++i)
      ASSERT_EQ(std::memcmp(&got[size_t(r)][size_t(i)], &want[size_t(i)], 4), 0)
          << "rank " << r << " element " << i << ": " << got[size_t(r)][size_t(i)]
          << ", PyTorch dividing first gives " << want[size_t(i)];

  // The stock hook: where one rank holds 65504 * 1.5, fp16 overflows there and not here.
  for (int r = 0; r < world; ++r) {
    EXPECT_TRUE(std::isfinite(want[size_t(r)])) << "element " << r;
    EXPECT_EQ(std::isinf(stock[size_t(r)]), dtype == DType::f16) << "element " << r << ": " << stock[size_t(r)];
  }
  // Elsewhere the two agree but for rounding: each rank's term differs by at most about one
  // 16-bit step, and each of the W - 1 additions (of partial sums up to W terms) may round
  // differently; bounded by 2W^2 steps of the largest term, plus subnormals. With W = 3 (1/3
  // inexact) some elements do differ.
  const float step = dtype == DType::f16 ? 1.0f / 1024 : 1.0f / 128;
  const float tiny = dtype == DType::f16 ? 6e-8f : 1e-38f;
  int differ = 0;
  for (int64_t i = world; i < count; ++i) {
    float largest = 0;
    for (int r = 0; r < world; ++r) largest = std::max(largest, std::fabs(all[size_t(r * count + i)]) / float(world));
    const float bound = 2.0f * float(world * world) * (largest * step + tiny);
    ASSERT_LE(std::fabs(want[size_t(i)] - stock[size_t(i)]), bound)
        << "element " << i << ": divide-first " << want[size_t(i)] << ", stock hook " << stock[size_t(i)];
    differ += want[size_t(i)] != stock[size_t(i)];
  }
  if (world == 3) {
    EXPECT_GT(differ, 0) << "dividing first changed no element: was the order really swapped?";
  }
}

std::vector<uint8_t> state_bytes(const nn::Module& m) {
  std::vector<uint8_t> out;
  for (auto& [name, t] : m.state_dict()) {
    const uint8_t* p = static_cast<const uint8_t*>(t.raw_data());
    out.insert(out.end(), p, p + t.nbytes());
  }
  return out;
}

// Mixed precision with fp16 compression: found_inf is agreed on in float32 as before, so one
// rank's overflow skips the step everywhere; and a loss scale so large that the averaged scaled
// gradients pass fp16's 65504 turns them into infinities in the compressed all-reduce, which
// every rank's scaler sees, so every rank skips and backs off.
TEST(CompressedDdp, ScalerOverflowAgreementStillSkipsOnEveryRank) {
  for (double init_scale : {65536.0, 1e9}) {
    std::vector<int> stepped(2, -1);
    std::vector<std::string> moved(2);
    std::vector<double> scale_after(2);
    test::run_rank_threads(2, [&](int rank, ProcessGroup& group) {
      Generator gen(0);
      nn::MiniResNet model(test::tiny_resnet(), gen);
      DdpOptions o;
      o.grad_compression = GradCompression::fp16;
      DistributedDataParallel ddp(model, group, o);
      nn::GradScalerOptions so;
      so.init_scale = init_scale;
      nn::GradScaler scaler(so);
      agree_on_overflow(scaler, ddp.comm());
      nn::SGD sgd(model.named_parameters(), {0.1f, 0.f, 0.f, 0.f, false});
      scaler.backward(ops::cross_entropy(ddp(test::union_images(rank * kPerRank, kPerRank)),
                                         test::union_labels(0, kPerRank)));
      ddp.reducer().wait_for_gradients();
      if (rank == 0 && init_scale < 1e6)  // only rank 0's gradients overflow, after the all-reduce
        model.named_parameters().front().second.grad().fill_(std::numeric_limits<double>::infinity());
      const std::vector<uint8_t> before = state_bytes(model);
      stepped[size_t(rank)] = scaler.step(sgd, 0.1) ? 1 : 0;
      if (state_bytes(model) != before) moved[size_t(rank)] = "weights changed";
      scale_after[size_t(rank)] = scaler.scale();
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(stepped[size_t(r)], 0) << "scale " << init_scale << ": rank " << r << " stepped";
      EXPECT_EQ(moved[size_t(r)], "") << "rank " << r;
      EXPECT_EQ(scale_after[size_t(r)], init_scale * 0.5) << "rank " << r;
    }
  }
}

// A transport without a 16-bit path (the staged Gloo one, or this stand-in) is refused by name.
class NoCompressionComm : public GradientComm {
 public:
  std::shared_ptr<Work> all_reduce_average(Tensor&, const Stream&, const std::string&) override {
    auto w = std::make_shared<Work>();
    w->finish();
    return w;
  }
  void wait(Work& work, const Stream&) override { work.wait(); }
  void broadcast(Tensor&, const Stream&) override {}
  void all_reduce_sum(double*, int64_t, const Stream&, const std::string&) override {}
  std::string name() const override { return "test transport"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
};

TEST(CompressedDdp, ATransportWithoutA16BitPathIsRefusedNamingTheKey) {
  Generator gen(0);
  nn::MiniResNet model(test::tiny_resnet(), gen);
  DdpOptions o;
  o.grad_compression = GradCompression::bf16;
  try {
    DistributedDataParallel ddp(model, std::make_unique<NoCompressionComm>(), o);
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("dist.grad_compression=bf16: test transport has no 16-bit all-reduce"),
              std::string::npos)
        << e.what();
  }
  o.grad_compression = GradCompression::none;
  EXPECT_NO_THROW(DistributedDataParallel(model, std::make_unique<NoCompressionComm>(), o));
}

TEST(CompressedDdp, ModeledBackendTimesThe16BitBytesAndRoundsTheData) {
  const Link slow{"slow", 0.001, 0.0};  // 1 MB/s: 100 KB over 2 ranks = 100 ms, 50 KB = 50 ms
  auto transport = make_modeled_comm(2, slow, Device::cpu());
  ASSERT_NE(transport->wire16(), nullptr);
  auto comm = make_compressed_comm(*transport, GradCompression::fp16);
  const std::vector<float> values = test::random_vector<float>(25000, 3);
  Tensor bucket = Tensor::from_vector(values, {25000});
  const size_t wire_bytes = 25000 * 2;  // float16
  const auto start = std::chrono::steady_clock::now();
  auto work = comm->all_reduce_average(bucket, Stream(), "test");
  comm->wait(*work, Stream());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NEAR(comm->modeled_ms(wire_bytes), 50.0, 1e-9);
  // What the backend timed, not a wall-clock margin (busy CI cores stretch sleeps): the 16-bit
  // bytes' 50 ms, not the 100 ms of float32. A sleep is never shorter than asked, so that bound holds.
  EXPECT_NEAR(work->modeled_ms, 50.0, 1e-9);
  EXPECT_GE(ms, 49.0);
  const std::vector<float> got = bucket.to_vector<float>();
  for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(got[i], float(Half(values[i]))) << i;
}

// ZeRO-1 with compression on the modeled backend: half a ring of the 16-bit bytes, and the one
// real rank's shard (the whole bucket) rounded to 16 bits as the all-reduce leaves it.
TEST(CompressedDdp, ModeledBackendTimesTheReduceScatterOfThe16BitBytes) {
  const Link slow{"slow", 0.001, 0.0};  // 1 MB/s: half a ring of 50 KB over 2 ranks = 25 ms
  auto transport = make_modeled_comm(2, slow, Device::cpu());
  auto comm = make_compressed_comm(*transport, GradCompression::bf16);
  const std::vector<float> values = test::random_vector<float>(25000, 4);
  Tensor bucket = Tensor::from_vector(values, {25000});
  const size_t wire_bytes = 25000 * 2;  // bfloat16
  const auto start = std::chrono::steady_clock::now();
  auto work = comm->shards()->reduce_scatter_average(bucket, Stream(), "test");
  comm->wait(*work, Stream());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NEAR(ring_half_ms(wire_bytes, 2, slow), 25.0, 1e-9);
  EXPECT_NEAR(work->modeled_ms, 25.0, 1e-9);  // half a ring, not the 50 ms of the 16-bit all-reduce
  EXPECT_GE(ms, 24.0);
  const std::vector<float> got = bucket.to_vector<float>();
  for (size_t i = 0; i < values.size(); ++i) ASSERT_EQ(got[i], float(BFloat16(values[i]))) << i;
}

}  // namespace
}  // namespace cg::dist
