// Helpers of the engine- and nn-level GPU tests: skipping without a GPU, random inputs, host
// copies, a GPU-vs-CPU check of an op's outputs and gradients, and the small image batches the
// model tests train on.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "engine/ops.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "kernels/cuda/device_info.h"
#include "support/need_gpu.h"
#include "support/tolerance.h"


namespace cg::test {

inline const Device kGpu = Device::cuda(0);

// The name of an (implementation choice, dtype) case of a parameterized test: "cudnn_float16".
inline std::string impl_dtype_case_name(const ::testing::TestParamInfo<std::tuple<ops::GpuImpl, DType>>& info) {
  return std::string(enum_name(std::get<0>(info.param))) + "_" + std::string(dtype_name(std::get<1>(info.param)));
}

inline std::vector<float> host_f32(const Tensor& t) {
  return t.to(DType::f32).to(Device::cpu()).to_vector<float>();
}

inline Tensor randn(const Shape& s, uint64_t seed, double mean = 0.0, double sd = 1.0) {
  Generator gen(seed);
  Tensor t = Tensor::empty(s);
  normal_(t, gen, mean, sd);
  return t;
}

// n images of 3x16x16 and labels cycling through the 10 classes.
inline Tensor random_images(int64_t n, uint64_t seed) { return randn({n, 3, 16, 16}, seed); }
inline Tensor labels_for(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = (i * 3) % 10;
  return Tensor::from_vector(v, {n});
}

using OpOnInputs = std::function<Tensor(const std::vector<Tensor>&)>;

// Runs f on float32 CPU inputs and on GPU copies; compares the outputs and every input's gradient
// for one random output gradient. `gpu_output_dtype` checks what autocast produced; gradients
// keep the inputs' float32 and shapes.
inline void expect_gpu_matches_cpu(const OpOnInputs& f, const std::vector<Tensor>& inputs, Tolerance tol,
                                   DType gpu_output_dtype = DType::f32) {
  std::vector<Tensor> cpu, gpu;
  for (const Tensor& t : inputs) {
    cpu.push_back(t.clone().set_requires_grad(true));
    gpu.push_back(t.to(kGpu).set_requires_grad(true));
  }
  const Tensor yc = f(cpu), yg = f(gpu);
  ASSERT_TRUE(yg.device().is_cuda()) << yg.str();
  EXPECT_EQ(yg.dtype(), gpu_output_dtype) << yg.str();
  EXPECT_EQ(yg.shape(), yc.shape());
  EXPECT_TRUE(all_close(host_f32(yg), yc.to_vector<float>(), tol)) << "forward";
  const Tensor dy = randn(yc.shape(), 99);
  yc.backward(dy);
  yg.backward(dy.to(gpu_output_dtype).to(kGpu));
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSERT_TRUE(gpu[i].grad().defined()) << "input " << i;
    EXPECT_EQ(gpu[i].grad().dtype(), DType::f32) << "gradient " << i << " keeps the input's dtype";
    EXPECT_EQ(gpu[i].grad().shape(), inputs[i].shape()) << "gradient " << i;
    EXPECT_TRUE(all_close(host_f32(gpu[i].grad()), cpu[i].grad().to_vector<float>(), tol)) << "gradient " << i;
  }
}

}  // namespace cg::test

namespace cg::ops {
// How GoogleTest prints an implementation choice parameter: its kernels.* name.
inline void PrintTo(GpuImpl impl, std::ostream* os) { *os << enum_name(impl); }
}  // namespace cg::ops
