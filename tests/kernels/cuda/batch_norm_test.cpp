// Batch norm on the GPU, hand-written and cuDNN, against the CPU reference in f32, f16 and bf16:
// training forward (y, saved and running statistics), training backward, eval forward and eval
// backward, with and without the fused ReLU and the fused residual, over every MiniResNet
// batch-norm shape (small batch) in NCHW and channels-last, and odd ones; also misaligned pointers
// (the scalar path) and a batch large enough for many slices per channel. Outputs poisoned first.
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "kernels/backend.h"
#include "kernels/cpu/batch_norm.h"
#include "kernels/cuda/batch_norm.h"
#include "kernels/cuda/cudnn.h"
#include "support/cuda_kernel_test.h"
#include "support/device_workspace.h"

namespace cg::kernels {
namespace {

using cpu::Activation;
using kernels::BatchNormShape;
using test::DeviceBuffer;

// MiniResNet with batch 4: CIFAR-like 32x32 (stages at 32, 16, 8) and Fashion-MNIST 28x28
// (28, 14, 7); then odd sizes (5x7 images, 3 or 13 channels, batch 1), and batch 32 at 64x32x32 so
// a channel is cut into many slices. H*W picks the vector width: 1024 and 64 take 16-byte vectors,
// 196 8-byte ones for half types, 49 and 35 single elements.
const BatchNormShape kShapes[] = {{4, 64, 32 * 32}, {4, 128, 16 * 16}, {4, 256, 8 * 8}, {4, 64, 28 * 28},
                                  {4, 128, 14 * 14}, {4, 256, 7 * 7},  {3, 5, 5 * 7},  {1, 13, 2},
                                  {2, 3, 1},         {32, 64, 32 * 32}};
// Channels-last ({N * H * W, C, 1}): the same MiniResNet layers, then many slices per channel,
// more than 256 channel vectors (two groups of lanes), and channel counts no vector divides. The
// reductions' grids (row_reduce_grid) range from one block ({35, 13}: one group, one slice) to
// several groups whose last blocks finish side by side ({8, 4096}: 128 groups of one slice;
// {32768, 64}: 2 fp32 groups of 256 slices).
const BatchNormShape kRowShapes[] = {{4 * 32 * 32, 64, 1}, {4 * 16 * 16, 128, 1}, {4 * 8 * 8, 256, 1},
                                     {4 * 14 * 14, 128, 1}, {4 * 7 * 7, 256, 1},  {32 * 32 * 32, 64, 1},
                                     {8, 4096, 1},          {6, 2050, 1},         {35, 13, 1}};
const DType kTypes[] = {DType::f32, DType::f16, DType::bf16};

enum class Impl { native, cudnn };

// Device copies of one case's inputs and poisoned outputs; `offset` elements of padding in front
// of every activation make its pointer misaligned (offset 1: the kernels' scalar path).
struct Case {
  BatchNormShape s;
  DType t;
  size_t n, c, offset;
  DeviceBuffer x, dy, gamma, beta, rm, rv, y, mean, invstd, dx, dgamma, dbeta, y_eval, r, dr;
  bool residual;

  static std::vector<float> padded(const std::vector<float>& v, size_t offset) {
    std::vector<float> out(offset, 0.f);
    out.insert(out.end(), v.begin(), v.end());
    return out;
  }
  Case(const BatchNormShape& shape, DType dtype, size_t off, const std::vector<float>& hx,
       const std::vector<float>& hdy, const std::vector<float>& hg, const std::vector<float>& hb,
       const std::vector<float>& hrm, const std::vector<float>& hrv, const std::vector<float>& hr)
      : s(shape), t(dtype), n(size_t(shape.n * shape.c * shape.hw)), c(size_t(shape.c)), offset(off),
        x(padded(hx, off), dtype), dy(padded(hdy, off), dtype), gamma(hg, DType::f32), beta(hb, DType::f32),
        rm(hrm, DType::f32), rv(hrv, DType::f32), y(n + off, dtype), mean(c, DType::f32), invstd(c, DType::f32),
        dx(n + off, dtype), dgamma(c, DType::f32), dbeta(c, DType::f32), y_eval(n + off, dtype),
        r(padded(hr.empty() ? std::vector<float>(n) : hr, off), dtype), dr(n + off, dtype), residual(!hr.empty()) {
    for (DeviceBuffer* o : {&y, &mean, &invstd, &dx, &dgamma, &dbeta, &y_eval, &dr}) o->poison();
  }
  const void* res() const { return residual ? at(r) : nullptr; }
  void* d_res() { return residual ? at(dr) : nullptr; }
  const void* at(const DeviceBuffer& b) const { return b.get<char>() + offset * itemsize(t); }
  void* at(DeviceBuffer& b) { return b.get<char>() + offset * itemsize(t); }
  std::vector<float> activation(const DeviceBuffer& b) const {
    std::vector<float> v = b.download();
    return std::vector<float>(v.begin() + long(offset), v.end());
  }
};

// Training forward + backward, then eval forward with the updated running statistics.
void run_training(Impl impl, Case& k, Activation act) {
  const void* relu_y = act == Activation::relu ? k.at(k.y) : nullptr;
  if (impl == Impl::cudnn) {
    if constexpr (kernels::kCudaLibraries) {  // cuDNN's calls exist only where it is linked
      std::vector<void*> scratch;
      auto ws = [&](size_t bytes) {
        scratch.push_back(cuda::device_malloc(bytes, 0));
        return scratch.back();
      };
      cuda::batch_norm_cudnn_forward_train(k.s, k.t, k.at(k.x), k.gamma.get<float>(), k.beta.get<float>(), 1e-5f, 0.1f,
                                          k.rm.get<float>(), k.rv.get<float>(), k.at(k.y), k.mean.get<float>(),
                                          k.invstd.get<float>(), act, k.res(), nullptr);
      cuda::batch_norm_cudnn_backward_train(k.s, k.t, k.at(k.dy), k.at(k.x), k.gamma.get<float>(), k.mean.get<float>(),
                                           k.invstd.get<float>(), 1e-5f, k.at(k.dx), k.dgamma.get<float>(),
                                           k.dbeta.get<float>(), relu_y, k.d_res(), ws, nullptr);
      cuda::batch_norm_cudnn_forward_eval(k.s, k.t, k.at(k.x), k.gamma.get<float>(), k.beta.get<float>(),
                                         k.rm.get<float>(), k.rv.get<float>(), 1e-5f, k.at(k.y_eval), act, k.res(),
                                         nullptr);
      cuda::synchronize_stream(nullptr);
      for (void* p : scratch) cuda::device_free(p, 0);
    } else {
      ADD_FAILURE() << "cuDNN is not linked in this build (NEED_CUDA_LIBRARY skips before this)";
    }
  } else {
    cuda::batch_norm_forward_train(k.s, k.t, k.at(k.x), k.gamma.get<float>(), k.beta.get<float>(), 1e-5f, 0.1f,
                                  k.rm.get<float>(), k.rv.get<float>(), k.at(k.y), k.mean.get<float>(),
                                  k.invstd.get<float>(), act, k.res(), test::device_workspace(), nullptr);
    cuda::batch_norm_backward_train(k.s, k.t, k.at(k.dy), k.at(k.x), k.gamma.get<float>(), k.mean.get<float>(),
                                   k.invstd.get<float>(), k.at(k.dx), k.dgamma.get<float>(), k.dbeta.get<float>(),
                                   relu_y, k.d_res(), test::device_workspace(), nullptr);
    cuda::batch_norm_forward_eval(k.s, k.t, k.at(k.x), k.gamma.get<float>(), k.beta.get<float>(), k.rm.get<float>(),
                                 k.rv.get<float>(), 1e-5f, k.at(k.y_eval), act, k.res(), test::device_workspace(),
                                 nullptr);
  }
}

void check_training(Impl impl, const BatchNormShape& s, DType t, Activation act, size_t offset, uint64_t seed,
                    bool residual = false) {
  const std::string where = fmt::format("{} {} n{} c{} hw{} relu {} offset {} residual {}",
                                        impl == Impl::cudnn ? "cudnn" : "native", dtype_name(t), s.n, s.c, s.hw,
                                        act == Activation::relu, offset, residual);
  const size_t n = size_t(s.n * s.c * s.hw), c = size_t(s.c);
  // x with a channel-dependent offset, so the mean matters (1.5 + c/8 on top of scale-2 noise).
  // cuDNN's channels-last fp32 training kernel loses about 1e-4 of y when the mean is hundreds of
  // times the spread (c = 4096, 8 values per channel: offsets up to 513; seen on the H100, cuDNN
  // 9.19): its offsets repeat every 64 channels (at most 9.4). Ours keep the full range.
  const size_t offset_period = impl == Impl::cudnn ? 64 : c;
  auto x = test::random_vector<float>(n, seed);
  for (size_t i = 0; i < n; ++i) x[i] = 2.f * x[i] + 1.5f + float((i / size_t(s.hw)) % c % offset_period) / 8.f;
  x = test::rounded(x, t);
  const auto dy = test::random_rounded(n, seed + 1, t);
  const auto g = test::random_vector<float>(c, seed + 2), b = test::random_vector<float>(c, seed + 3);
  const auto rm = test::random_vector<float>(c, seed + 4);
  std::vector<float> rv(c);
  for (size_t i = 0; i < c; ++i) rv[i] = 0.5f + float(i % 7) / 4.f;

  const auto r = residual ? test::random_rounded(n, seed + 5, t) : std::vector<float>();
  const float* cpu_r = residual ? r.data() : nullptr;

  std::vector<float> y(n), mean(c), invstd(c), dx(n), dg(c), db(c), rm_c = rm, rv_c = rv, ye(n), dr(n);
  cpu::batch_norm_forward_train<float>(s, x.data(), g.data(), b.data(), 1e-5f, 0.1f, rm_c.data(), rv_c.data(),
                                      y.data(), mean.data(), invstd.data(), act, cpu_r);
  cpu::batch_norm_forward_eval<float>(s, x.data(), g.data(), b.data(), rm_c.data(), rv_c.data(), 1e-5f, ye.data(), act,
                                     cpu_r);

  Case k(s, t, offset, x, dy, g, b, rm, rv, r);
  run_training(impl, k, act);

  // The GPU masks dy with its own y; give the CPU that very mask. The CPU's own y (even rounded
  // to t) would not do: with a residual the GPU rounds bn(x) to t before adding it (the CPU
  // reference runs in float), so round(bn) + r and bn + r differ in sign for about 1 element in
  // 10^4 (f16) or 10^3 (bf16), and even in float the two y differ near 0 by an ulp of the shift.
  const auto gpu_y = k.activation(k.y);
  cpu::batch_norm_backward_train<float>(s, dy.data(), x.data(), g.data(), mean.data(), invstd.data(), dx.data(),
                                       dg.data(), db.data(), act == Activation::relu ? gpu_y.data() : nullptr,
                                       residual ? dr.data() : nullptr);

  const test::Tolerance tol = test::tolerance_of(t), f32 = test::tolerance_for<float>();
  const double m = double(s.n * s.hw);
  EXPECT_TRUE(test::all_close(k.activation(k.y), y, tol)) << where << ": y";
  EXPECT_TRUE(test::all_close(k.mean.download(), mean, f32)) << where << ": saved mean";
  EXPECT_TRUE(test::all_close(k.invstd.download(), invstd, {1e-4, 1e-3})) << where << ": saved invstd";
  EXPECT_TRUE(test::all_close(k.rm.download(), rm_c, f32)) << where << ": running_mean";
  EXPECT_TRUE(test::all_close(k.rv.download(), rv_c, {1e-4, 1e-3})) << where << ": running_var";
  EXPECT_TRUE(test::all_close(k.activation(k.dx), dx, tol)) << where << ": dx";
  EXPECT_TRUE(test::all_close(k.dgamma.download(), dg, test::for_sum(f32, m))) << where << ": dgamma";
  EXPECT_TRUE(test::all_close(k.dbeta.download(), db, test::for_sum(f32, m))) << where << ": dbeta";
  EXPECT_TRUE(test::all_close(k.activation(k.y_eval), ye, tol)) << where << ": eval y";
  // The residual's gradient is dy, masked: exact (the mask is the GPU's own y, given to the CPU).
  if (residual) {
    EXPECT_EQ(k.activation(k.dr), dr) << where << ": d_residual";
  }
}

// One case per implementation x dtype x layout x residual, so that a failure names its case
// (e.g. CudaBatchNormTraining.MatchesTheCpu/cudnn_float16_channels_last_residual).
struct TrainingCase {
  Impl impl;
  DType dtype;
  bool channels_last;  // the kRowShapes ({N * H * W, C, 1}) instead of kShapes
  bool residual;
};

std::vector<TrainingCase> all_cases() {
  std::vector<TrainingCase> out;
  for (Impl impl : {Impl::native, Impl::cudnn})
    for (DType t : kTypes)
      for (bool rows : {false, true})
        for (bool residual : {false, true}) out.push_back({impl, t, rows, residual});
  return out;
}

std::string case_name(const ::testing::TestParamInfo<TrainingCase>& info) {
  const TrainingCase& c = info.param;
  return fmt::format("{}_{}_{}{}", c.impl == Impl::native ? "native" : "cudnn", dtype_name(c.dtype),
                     c.channels_last ? "channels_last" : "nchw", c.residual ? "_residual" : "");
}

class CudaBatchNormTraining : public ::testing::TestWithParam<TrainingCase> {};

TEST_P(CudaBatchNormTraining, MatchesTheCpu) {
  NEED_GPU();
  const TrainingCase c = GetParam();
  if (c.impl == Impl::cudnn) NEED_CUDA_LIBRARY("cuDNN");
  uint64_t seed = 1 + 100000 * uint64_t(c.impl == Impl::cudnn) + 1000 * uint64_t(c.dtype) +
                  500 * uint64_t(c.channels_last) + 250 * uint64_t(c.residual);
  const auto& shapes = c.channels_last ? std::vector<BatchNormShape>(std::begin(kRowShapes), std::end(kRowShapes))
                                       : std::vector<BatchNormShape>(std::begin(kShapes), std::end(kShapes));
  for (const BatchNormShape& s : shapes) {
    if constexpr (kernels::kCudaLibraries) {
      if (c.impl == Impl::cudnn && !cuda::batch_norm_cudnn_supports(s, c.dtype)) continue;
    }
    for (Activation act : {Activation::none, Activation::relu})
      check_training(c.impl, s, c.dtype, act, 0, seed += 10, c.residual);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaBatchNormTraining, ::testing::ValuesIn(all_cases()), case_name);

std::string dtype_case(const ::testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); }

class CudaBatchNormDtype : public ::testing::TestWithParam<DType> {};

TEST_P(CudaBatchNormDtype, NativeMisalignedPointersTakeTheScalarPath) {
  NEED_GPU();
  const DType t = GetParam();
  uint64_t seed = 5000 + 100 * uint64_t(t);
  for (const BatchNormShape& s : {BatchNormShape{4, 64, 32 * 32}, BatchNormShape{4, 128, 14 * 14}})
    check_training(Impl::native, s, t, Activation::relu, 1, seed += 10);
  // channels-last, with the residual
  check_training(Impl::native, BatchNormShape{4 * 16 * 16, 128, 1}, t, Activation::relu, 1, seed += 10, true);
}

TEST_P(CudaBatchNormDtype, EvalBackwardMatchesTheCpu) {
  NEED_GPU();
  const DType t = GetParam();
  uint64_t seed = 20000 + 1000 * uint64_t(t);
  for (const BatchNormShape& s : kShapes)
    for (bool relu : {false, true}) {
      const std::string where = fmt::format("{} n{} c{} hw{} relu {}", dtype_name(t), s.n, s.c, s.hw, relu);
      const size_t n = size_t(s.n * s.c * s.hw), c = size_t(s.c);
      const auto x = test::random_rounded(n, seed++, t), dy = test::random_rounded(n, seed++, t);
      const auto relu_y = test::random_rounded(n, seed++, t);  // only its sign matters: a mask
      const auto g = test::random_vector<float>(c, seed++), rm = test::random_vector<float>(c, seed++);
      std::vector<float> rv(c);
      for (size_t i = 0; i < c; ++i) rv[i] = 0.3f + float(i % 5) / 3.f;
      std::vector<float> dx(n), dg(c), db(c);
      cpu::batch_norm_backward_eval<float>(s, dy.data(), x.data(), g.data(), rm.data(), rv.data(), 1e-5f, dx.data(),
                                          dg.data(), db.data(), relu ? relu_y.data() : nullptr);
      DeviceBuffer gx(x, t), gdy(dy, t), gry(relu_y, t), gg(g, DType::f32), grm(rm, DType::f32), grv(rv, DType::f32);
      DeviceBuffer gdx(n, t), gdg(c, DType::f32), gdb(c, DType::f32);
      for (DeviceBuffer* o : {&gdx, &gdg, &gdb}) o->poison();
      cuda::batch_norm_backward_eval(s, t, gdy.get(), gx.get(), gg.get<float>(), grm.get<float>(), grv.get<float>(),
                                    1e-5f, gdx.get(), gdg.get<float>(), gdb.get<float>(), relu ? gry.get() : nullptr,
                                    nullptr, test::device_workspace(), nullptr);
      const test::Tolerance f32 = test::tolerance_for<float>();
      const double m = double(s.n * s.hw);
      EXPECT_TRUE(test::all_close(gdx.download(), dx, test::tolerance_of(t))) << where << ": dx";
      EXPECT_TRUE(test::all_close(gdg.download(), dg, test::for_sum(f32, m))) << where << ": dgamma";
      EXPECT_TRUE(test::all_close(gdb.download(), db, test::for_sum(f32, m))) << where << ": dbeta";
    }
}

// Random values spread over 2^-12 .. 2^12 (still finite in fp16): their squares span more bits
// than a double holds, so the float64 totals change with the order they are added in (values of
// one magnitude add exactly in double, in any order, and would hide it).
std::vector<float> wide_random(size_t n, uint64_t seed, DType t) {
  auto v = test::random_vector<float>(n, seed);
  for (size_t i = 0; i < n; ++i) v[i] = std::ldexp(v[i], int(i * 7 % 25) - 12);
  return test::rounded(v, t);
}

// Every output of one channels-last training forward and backward (fused ReLU and residual),
// from fresh running statistics: the reductions' last blocks add the slices in a fixed order,
// whichever block arrives last, so two runs (the second with the blocks in reverse order) must
// agree to the bit.
std::vector<std::vector<float>> channels_last_outputs(const BatchNormShape& s, DType t, uint64_t seed) {
  const size_t n = size_t(s.n * s.c), c = size_t(s.c);
  const auto x = wide_random(n, seed, t), dy = wide_random(n, seed + 1, t), r = test::random_rounded(n, seed + 2, t);
  const auto g = test::random_vector<float>(c, seed + 3), b = test::random_vector<float>(c, seed + 4);
  Case k(s, t, 0, x, dy, g, b, std::vector<float>(c, 0.f), std::vector<float>(c, 1.f), r);
  run_training(Impl::native, k, Activation::relu);
  return {k.activation(k.y), k.mean.download(), k.invstd.download(), k.rm.download(), k.rv.download(),
          k.activation(k.dx), k.dgamma.download(), k.dbeta.download(), k.activation(k.dr)};
}

// Runs f() with the emulated GPU handing out blocks last first (CG_EMU_BLOCK_ORDER), so the
// last block to arrive is another one than in a plain run; on a device, a plain second run.
template <typename F>
auto with_blocks_reversed(F&& f) {
  if (!kernels::kGpuEmulation) return f();
  setenv("CG_EMU_BLOCK_ORDER", "reverse", 1);
  auto out = f();  // downloaded: every grid has run
  unsetenv("CG_EMU_BLOCK_ORDER");
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_P(CudaBatchNormDtype, ChannelsLastRunsGiveIdenticalBits) {
  NEED_GPU();
  const DType t = GetParam();
  // Many slices of rows in two channel groups; 128 groups of one slice; a single block.
  for (const BatchNormShape& s : {BatchNormShape{32 * 32 * 32, 64, 1}, BatchNormShape{8, 4096, 1},
                                  BatchNormShape{35, 13, 1}}) {
    const auto first = channels_last_outputs(s, t, 700);
    const auto second = with_blocks_reversed([&] { return channels_last_outputs(s, t, 700); });
    for (size_t i = 0; i < first.size(); ++i)
      EXPECT_TRUE(same_bits(first[i], second[i])) << dtype_name(t) << " " << s.n << "x" << s.c << ": output " << i;
  }
}

// SyncBatchNorm's local phases hand their float64 totals on unrounded, so they show a change in
// the order the slices are added where the float outputs above would mostly round it away.
std::vector<double> local_totals(const BatchNormShape& s, DType t, uint64_t seed) {
  const size_t n = size_t(s.n * s.c * s.hw), c = size_t(s.c);
  DeviceBuffer x(wide_random(n, seed, t), t), dy(wide_random(n, seed + 1, t), t);
  DeviceBuffer mean(test::random_vector<float>(c, seed + 2), DType::f32);
  DeviceBuffer invstd(std::vector<float>(c, 2.f), DType::f32);
  DeviceBuffer dgamma(c, DType::f32), dbeta(c, DType::f32), moments(2 * c + 1, DType::f64), sums(2 * c, DType::f64);
  cuda::batch_norm_local_moments(s, t, x.get(), moments.get<double>(), test::device_workspace(), nullptr);
  cuda::batch_norm_local_grad_sums(s, t, dy.get(), x.get(), mean.get<float>(), invstd.get<float>(), dgamma.get<float>(),
                                  dbeta.get<float>(), sums.get<double>(), nullptr, nullptr, test::device_workspace(),
                                  nullptr);
  std::vector<double> out(4 * c + 1);
  cuda::copy_device_to_host(out.data(), moments.get(), (2 * c + 1) * sizeof(double), nullptr);
  cuda::copy_device_to_host(out.data() + 2 * c + 1, sums.get(), 2 * c * sizeof(double), nullptr);
  cuda::synchronize_stream(nullptr);
  return out;
}

TEST_P(CudaBatchNormDtype, LocalTotalsGiveIdenticalBits) {
  NEED_GPU();
  const DType t = GetParam();
  // Channels-last: two channel groups of 128 or more slices each; NCHW: 16 or 17 slices a channel.
  for (const BatchNormShape& s : {BatchNormShape{32 * 32 * 32, 64, 1}, BatchNormShape{32, 64, 32 * 32}}) {
    const auto first = local_totals(s, t, 900);
    const auto second = with_blocks_reversed([&] { return local_totals(s, t, 900); });
    EXPECT_EQ(0, std::memcmp(first.data(), second.data(), first.size() * sizeof(double)))
        << dtype_name(t) << " " << s.n << "x" << s.c << "x" << s.hw;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaBatchNormDtype, ::testing::ValuesIn(kTypes), dtype_case);

}  // namespace
}  // namespace cg::kernels
