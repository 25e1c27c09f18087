// DDP's gradient compression steps on the GPU (the float32 scale by 1/W, then the cast kernel, on the
// current stream) give the CPU's bits, for fp16 and bf16 and several world sizes, including a
// slice at an odd offset (unaligned for the vectorized kernels). Skips without a GPU.
#include <gtest/gtest.h>

#include <cstring>

#include "engine/compress_ops.h"
#include "support/need_gpu.h"
#include "support/random_data.h"

namespace cg {
namespace {

std::vector<uint16_t> bits_of(const Tensor& t16) {
  Tensor host = t16.to(Device::cpu());
  const uint16_t* p = static_cast<const uint16_t*>(host.raw_data());
  return std::vector<uint16_t>(p, p + host.numel());
}

TEST(CudaGradCompression, MatchesTheCpuBitForBit) {
  NEED_GPU();
  std::vector<float> g = test::random_vector<float>(100003, 9);
  for (size_t i = 0; i < g.size(); i += 97) g[i] *= 3e4f;  // some beyond fp16's range
  for (DType dtype : {DType::f16, DType::bf16}) {
    for (int world : {1, 2, 3, 8}) {
      Tensor cpu_bucket = Tensor::from_vector(g, {int64_t(g.size())});
      Tensor cpu_compressed = Tensor::empty({int64_t(g.size())}, dtype);
      ops::compress_gradients(cpu_bucket, cpu_compressed, world);
      // The GPU side works on a slice at element offset 3 of a larger buffer.
      Tensor gpu_flat = Tensor::from_vector(g, {int64_t(g.size())}).to(Device::cuda());
      Tensor gpu_bucket = gpu_flat.view_at(3, {int64_t(g.size()) - 3});
      Tensor gpu_compressed_all = Tensor::empty({int64_t(g.size())}, dtype, Device::cuda());
      Tensor gpu_compressed = gpu_compressed_all.view_at(1, {int64_t(g.size()) - 3});
      ops::compress_gradients(gpu_bucket, gpu_compressed, world);
      const std::vector<uint16_t> want = bits_of(cpu_compressed), got = bits_of(gpu_compressed);
      for (size_t i = 0; i + 3 < g.size(); ++i)
        ASSERT_EQ(got[i], want[i + 3]) << dtype_name(dtype) << " W=" << world << " element " << i + 3;
      ops::decompress_gradients(gpu_compressed, gpu_bucket);
      ops::decompress_gradients(cpu_compressed, cpu_bucket);
      const std::vector<float> back_gpu = gpu_bucket.to_vector<float>(), back_cpu = cpu_bucket.to_vector<float>();
      for (size_t i = 0; i + 3 < g.size(); ++i)
        ASSERT_EQ(std::memcmp(&back_gpu[i], &back_cpu[i + 3], 4), 0) << dtype_name(dtype) << " element " << i + 3;
    }
  }
}

}  // namespace
}  // namespace cg
