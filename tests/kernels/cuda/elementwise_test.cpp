// Elementwise kernels in f32, f16 and bf16 and the casts between every pair of dtypes, against the
// CPU reference (the casts and fills bit for bit); outputs poisoned first.
#include <cstring>

#include "kernels/cpu/cast.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cuda/elementwise.h"
#include "support/cuda_kernel_test.h"

namespace cg::kernels {
namespace {

using test::DeviceBuffer;

TEST(CudaElementwise, EveryOpMatchesTheCpuInEveryFloatingType) {
  NEED_GPU();
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (int64_t n : {int64_t(1), int64_t(1000), int64_t(256 * 64 * 32 * 32 + 3)}) {
      const auto a = test::random_rounded(size_t(n), 1, t), b = test::random_rounded(size_t(n), 2, t);
      std::vector<float> ref(static_cast<size_t>(n));
      DeviceBuffer ga(a, t), gb(b, t), gy(size_t(n), t);
      auto check = [&](const char* op) {
        // The GPU computes in fp32 and rounds once, like the CPU reference followed by rounding.
        EXPECT_TRUE(test::all_close(gy.download(), test::rounded(ref, t), {0, 0})) << op << " " << dtype_name(t) << " n "
                                                                                  << n;
        gy.poison();
      };
      gy.poison();
      cuda::relu_forward(n, t, ga.get(), gy.get(), nullptr);
      cpu::relu_forward<float>(n, a.data(), ref.data());
      check("relu");
      cuda::relu_backward(n, t, ga.get(), gb.get(), gy.get(), nullptr);
      cpu::relu_backward<float>(n, a.data(), b.data(), ref.data());
      check("relu_backward");
      cuda::add(n, t, ga.get(), gb.get(), gy.get(), nullptr);
      cpu::add<float>(n, a.data(), b.data(), ref.data());
      check("add");
      cuda::add_relu(n, t, ga.get(), gb.get(), gy.get(), nullptr);
      cpu::add_relu<float>(n, a.data(), b.data(), ref.data());
      check("add_relu");
      cuda::scale(n, t, -0.375f, ga.get(), gy.get(), nullptr);
      cpu::scale<float>(n, -0.375f, a.data(), ref.data());
      check("scale");
      gy.upload(b);
      cuda::accumulate(n, t, ga.get(), gy.get(), nullptr);
      ref = b;
      cpu::accumulate<float>(n, a.data(), ref.data());
      check("accumulate");
    }
}

TEST(CudaCast, EveryPairOfDtypesConvertsLikeTheCpu) {
  NEED_GPU();
  const DType all[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32, DType::u8};
  std::vector<float> values = test::random_vector<float>(4099, 3);
  for (float& v : values) v = v * 60.f + 70.f;  // mostly in u8's range; ties and large values too
  for (DType from : all)
    for (DType to : all) {
      const int64_t n = int64_t(values.size());
      std::vector<unsigned char> src(size_t(n) * itemsize(from)), want(size_t(n) * itemsize(to)), got(want.size());
      cpu::cast(n, DType::f32, values.data(), from, src.data());
      cpu::cast(n, from, src.data(), to, want.data());
      void* gsrc = cuda::device_malloc(src.size(), 0);
      void* gdst = cuda::device_malloc(got.size(), 0);
      cuda::copy_host_to_device(gsrc, src.data(), src.size(), nullptr);
      cuda::cast(n, from, gsrc, to, gdst, nullptr);
      cuda::copy_device_to_host(got.data(), gdst, got.size(), nullptr);
      cuda::synchronize_stream(nullptr);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0) << dtype_name(from) << " -> " << dtype_name(to);
      cuda::device_free(gsrc, 0);
      cuda::device_free(gdst, 0);
    }
}

TEST(CudaCast, FillWritesTheCpusBits) {
  NEED_GPU();
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::u8})
    for (double v : {0.0, 1.0, -2.5, 65536.0, 1.0 / 3.0}) {
      const int64_t n = 777;
      std::vector<unsigned char> want(size_t(n) * itemsize(t)), got(want.size());
      cpu::fill_cast(n, v, t, want.data());
      void* g = cuda::device_malloc(got.size(), 0);
      cuda::fill(n, t, v, g, nullptr);
      cuda::copy_device_to_host(got.data(), g, got.size(), nullptr);
      cuda::synchronize_stream(nullptr);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0) << dtype_name(t) << " " << v;
      cuda::device_free(g, 0);
    }
}

}  // namespace
}  // namespace cg::kernels
