// CUDA tensors and the elementwise kernels against the CPU reference, forward and through
// autograd; the caching allocator keeps steady-state steps free of cudaMalloc. Skips without a GPU.
#include <gtest/gtest.h>

#include "engine/device_allocator.h"
#include "engine/ops.h"
#include "engine/random.h"
#include "kernels/cuda/device_info.h"
#include "support/need_gpu.h"

namespace cg {
namespace {

Tensor random_cpu(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  Tensor t = Tensor::empty(shape);
  normal_(t, gen, 0.0, 1.0);
  return t;
}

TEST(CudaElementwise, MatchesTheCpuBitForBit) {
  NEED_GPU();
  const Shape shape{3, 1000, 37};  // not a multiple of the block size
  Tensor a = random_cpu(shape, 1), b = random_cpu(shape, 2);
  Tensor ga = a.to(Device::cuda()), gb = b.to(Device::cuda());
  EXPECT_EQ(ops::relu(ga).to_vector<float>(), ops::relu(a).to_vector<float>());
  EXPECT_EQ(ops::add(ga, gb).to_vector<float>(), ops::add(a, b).to_vector<float>());
  EXPECT_EQ(ops::add_relu(ga, gb).to_vector<float>(), ops::add_relu(a, b).to_vector<float>());
  EXPECT_EQ(ops::scale(ga, -0.37).to_vector<float>(), ops::scale(a, -0.37).to_vector<float>());
  EXPECT_EQ(Tensor::zeros(shape, DType::f32, Device::cuda()).to_vector<float>(), std::vector<float>(size_t(a.numel()), 0.f));
}

TEST(CudaElementwise, GradientsThroughAutogradMatchTheCpu) {
  NEED_GPU();
  Tensor a = random_cpu({4, 513}, 3), b = random_cpu({4, 513}, 4);
  auto run = [&](Device d) {
    Tensor x = a.to(d).detach().set_requires_grad(true);
    Tensor y = b.to(d).detach().set_requires_grad(true);
    Tensor out = ops::scale(ops::relu(ops::add_relu(x, y)), 2.0);
    out.backward(Tensor::full(out.shape(), 1.0).to(d));
    return std::make_pair(x.grad().to_vector<float>(), y.grad().to_vector<float>());
  };
  EXPECT_EQ(run(Device::cuda()), run(Device::cpu()));
}

TEST(CudaAllocator, SteadyStateStepsAllocateNothingNew) {
  NEED_GPU();
  Tensor a = random_cpu({64, 4096}, 5).to(Device::cuda());
  auto step = [&] {
    Tensor x = a.detach().set_requires_grad(true);
    ops::scale(ops::relu(x), 3.0).backward(Tensor::zeros(a.shape(), DType::f32, Device::cuda()));
  };
  step();
  const size_t before = allocator_for(Device::cuda()).stats().backend_allocations;
  for (int i = 0; i < 5; ++i) step();
  EXPECT_EQ(allocator_for(Device::cuda()).stats().backend_allocations, before);
}

}  // namespace
}  // namespace cg
