// Issue 37 item 6: how the hand-written batch norm reads and writes device memory, counted by the
// emulated GPU (cg_emu/traffic.h): in every kernel of the training forward and backward, both
// layouts, fp32 and fp16, each activation is read and written coalesced (nearly every byte of the
// 32-byte sectors it touches is used), and as many times as the design says.
// The counts are deterministic, so the floors are exact properties of the kernels' indexing, not
// timings. Emulated build with the access hooks only; skips elsewhere saying so.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/batch_norm.h"
#include "support/cuda_kernel_test.h"
#include "support/device_workspace.h"
#include "support/traffic_counts.h"


namespace cg::kernels {
namespace {

using cuda::Activation;
using test::DeviceBuffer;

#if CUDAGRAD_TRAFFIC_COUNTS
// The activation-sized buffers of one case, whose traffic the floors are about.
struct Activations {
  std::vector<std::pair<const char*, const void*>> named;
  const char* name_of(uintptr_t address) const {
    for (const auto& [name, p] : named)
      if (reinterpret_cast<uintptr_t>(p) == address) return name;
    return nullptr;
  }
};

struct Recorded {
  std::vector<cg_emu::LaunchTraffic> forward, backward;
  Activations activations;
};

// One training forward and backward with the fused ReLU (and the residual when asked) on random
// data, each recorded.
Recorded record_training(const BatchNormShape& s, DType t, bool residual) {
  const size_t n = size_t(s.n * s.c * s.hw), c = size_t(s.c);
  DeviceBuffer x(test::random_rounded(n, 1, t), t), dy(test::random_rounded(n, 2, t), t), r(test::random_rounded(n, 3, t), t);
  DeviceBuffer gamma(std::vector<float>(c, 1.f), DType::f32), beta(std::vector<float>(c, 0.f), DType::f32);
  DeviceBuffer rm(std::vector<float>(c, 0.f), DType::f32), rv(std::vector<float>(c, 1.f), DType::f32);
  DeviceBuffer y(n, t), dx(n, t), dr(n, t), mean(c, DType::f32), invstd(c, DType::f32), dg(c, DType::f32), db(c, DType::f32);
  Recorded out;
  out.activations.named = {{"x", x.get<void>()}, {"y", y.get<void>()}, {"residual", r.get<void>()},
                           {"dy", dy.get<void>()}, {"dx", dx.get<void>()}, {"d_residual", dr.get<void>()}};
  cg_emu::start_traffic_recording();
  cuda::batch_norm_forward_train(s, t, x.get<void>(), gamma.get<float>(), beta.get<float>(), 1e-5f, 0.1f,
                                 rm.get<float>(), rv.get<float>(), y.get<void>(), mean.get<float>(),
                                 invstd.get<float>(), Activation::relu, residual ? r.get<void>() : nullptr,
                                 test::device_workspace(), nullptr);
  out.forward = cg_emu::stop_traffic_recording();
  cg_emu::start_traffic_recording();
  cuda::batch_norm_backward_train(s, t, dy.get<void>(), x.get<void>(), gamma.get<float>(), mean.get<float>(),
                                  invstd.get<float>(), dx.get<void>(), dg.get<float>(), db.get<float>(), y.get<void>(),
                                  residual ? dr.get<void>() : nullptr, test::device_workspace(), nullptr);
  out.backward = cg_emu::stop_traffic_recording();
  return out;
}

void print(const std::string& what, const cg_emu::LaunchTraffic& l, const Activations& a) {
  std::printf("%s, %s:\n", what.c_str(), l.kernel.c_str());
  for (const cg_emu::AllocationTraffic& t : l.by_allocation) {
    const char* name = a.name_of(t.address);
    std::printf("  %-10s loads %9llu B eff %.3f footprint %9llu B | stores %9llu B eff %.3f footprint %9llu B\n",
                name ? name : "(other)", (unsigned long long)t.loads.bytes, t.loads.efficiency(),
                (unsigned long long)(32 * t.loads.footprint_sectors), (unsigned long long)t.stores.bytes,
                t.stores.efficiency(), (unsigned long long)(32 * t.stores.footprint_sectors));
  }
}

// Bytes of the activation `name` the launches move: each launch's footprint in it, summed.
uint64_t moved(const std::vector<cg_emu::LaunchTraffic>& launches, const Activations& a, const char* name, bool stores) {
  uint64_t sectors = 0;
  for (const auto& l : launches)
    for (const cg_emu::AllocationTraffic& t : l.by_allocation)
      if (const char* n = a.name_of(t.address); n && std::string(n) == name)
        sectors += (stores ? t.stores : t.loads).footprint_sectors;
  return 32 * sectors;
}
#endif

struct TrafficCase {
  BatchNormShape s;
  DType t;
  const char* layout;
};

// MiniResNet's layers at batch 8 in both layouts (channels-last as {N*H*W, C, 1}).
const TrafficCase kCases[] = {{{8 * 32 * 32, 64, 1}, DType::f16, "NHWC"}, {{8 * 8 * 8, 256, 1}, DType::f16, "NHWC"},
                              {{8 * 16 * 16, 128, 1}, DType::f32, "NHWC"}, {{8, 64, 32 * 32}, DType::f16, "NCHW"},
                              {{8, 256, 8 * 8}, DType::f16, "NCHW"},       {{8, 128, 16 * 16}, DType::f32, "NCHW"}};

// Sector efficiency every access to an activation must reach: all of it, as the kernels read and
// write whole 16-byte vectors along contiguous memory (lanes side by side), save where a thread's
// range of a channel plane (NCHW) starts or ends inside a sector. Read across rows instead (each
// lane in a sector of its own) an activation gives 1/8 to 1/2.
constexpr double kFloor = 0.95;

class BatchNormTraffic : public ::testing::TestWithParam<TrafficCase> {
 protected:
  void SetUp() override { NEED_TRAFFIC_COUNTS(); }
};

TEST_P(BatchNormTraffic, EveryActivationIsReadAndWrittenCoalescedAndAsOftenAsDesigned) {
#if CUDAGRAD_TRAFFIC_COUNTS
  const TrafficCase& k = GetParam();
  const double a = double(uint64_t(k.s.n * k.s.c * k.s.hw) * itemsize(k.t));
  for (const bool residual : {false, true}) {
    const Recorded r = record_training(k.s, k.t, residual);
    const std::string name = fmt::format("{} {} n{} c{} hw{}{}", k.layout, dtype_name(k.t), k.s.n, k.s.c, k.s.hw,
                                         residual ? " +residual" : "");
    ASSERT_EQ(r.forward.size(), 2u) << "statistics, then the affine pass";
    ASSERT_EQ(r.backward.size(), 2u) << "gradient sums, then the input gradient";
    for (const auto* phase : {&r.forward, &r.backward})
      for (const cg_emu::LaunchTraffic& l : *phase) {
        print(name, l, r.activations);
        ASSERT_GT(l.loads.requests, 0u) << l.kernel << ": no loads counted (kernels without the access hooks?)";
        for (const cg_emu::AllocationTraffic& t : l.by_allocation) {
          const char* buffer = r.activations.name_of(t.address);
          if (!buffer) continue;  // per-channel vectors and partial sums
          if (t.loads.requests) {
            EXPECT_GE(t.loads.efficiency(), kFloor) << name << ", " << l.kernel << ": loads of " << buffer;
          }
          if (t.stores.requests) {
            EXPECT_GE(t.stores.efficiency(), kFloor) << name << ", " << l.kernel << ": stores to " << buffer;
          }
        }
      }
    // Forward: x twice (statistics, then the affine pass, which also reads the residual once), y
    // written once. Backward: dy, x and the ReLU output y in both passes (the sums, then dx), dx
    // written once, and with the residual d_residual (the masked dy) written by the sums and read
    // instead of dy and y by the second pass.
    auto expect_moved = [&](const std::vector<cg_emu::LaunchTraffic>& launches, const char* buffer, bool stores, double times) {
      EXPECT_NEAR(double(moved(launches, r.activations, buffer, stores)), times * a, 0.01 * a)
          << name << ": " << buffer << (stores ? " written" : " read");
    };
    expect_moved(r.forward, "x", false, 2);
    expect_moved(r.forward, "residual", false, residual ? 1 : 0);
    expect_moved(r.forward, "y", true, 1);
    expect_moved(r.backward, "x", false, 2);
    expect_moved(r.backward, "dy", false, residual ? 1 : 2);
    expect_moved(r.backward, "y", false, residual ? 1 : 2);
    expect_moved(r.backward, "d_residual", false, residual ? 1 : 0);
    expect_moved(r.backward, "d_residual", true, residual ? 1 : 0);
    expect_moved(r.backward, "dx", true, 1);
  }
#endif
}

INSTANTIATE_TEST_SUITE_P(Layers, BatchNormTraffic, ::testing::ValuesIn(kCases), [](const auto& info) {
  const TrafficCase& k = info.param;
  return fmt::format("{}_{}_c{}", k.layout, dtype_name(k.t), k.s.c);
});

}  // namespace
}  // namespace cg::kernels
