// What the kernel-level GPU tests share: the skip, device buffers that start poisoned, random
// inputs rounded to the dtype under test, and the per-dtype tolerance (tests/support/tolerance.h).
// Host values are float; a device buffer holds them in f32, f16 or bf16.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/cast.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/memory.h"
#include "support/need_gpu.h"
#include "support/random_data.h"
#include "support/tolerance.h"
#include "util/dtype.h"


namespace cg::test {

inline Tolerance tolerance_of(DType t) {
  switch (t) {
    case DType::f16: return kToleranceF16;
    case DType::bf16: return kToleranceBF16;
    default: return tolerance_for<float>();
  }
}

// Values as the dtype stores them (rounded), back as float: what the CPU reference should see.
inline std::vector<float> rounded(const std::vector<float>& v, DType t) {
  std::vector<unsigned char> bytes(v.size() * itemsize(t));
  kernels::cpu::cast(int64_t(v.size()), DType::f32, v.data(), t, bytes.data());
  std::vector<float> out(v.size());
  kernels::cpu::cast(int64_t(v.size()), t, bytes.data(), DType::f32, out.data());
  return out;
}

inline std::vector<float> random_rounded(size_t n, uint64_t seed, DType t, float scale = 1.f) {
  std::vector<float> v = random_vector<float>(n, seed);
  for (float& x : v) x *= scale;
  return rounded(v, t);
}

// A device buffer of n elements of `dtype`, freed on scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer(size_t n, DType dtype) : n_(n), dtype_(dtype) {
    ptr_ = kernels::cuda::device_malloc(std::max<size_t>(n * itemsize(dtype), 1), 0);
    EXPECT_NE(ptr_, nullptr);
  }
  // From host floats (converted to dtype).
  DeviceBuffer(const std::vector<float>& v, DType dtype) : DeviceBuffer(v.size(), dtype) { upload(v); }
  ~DeviceBuffer() { kernels::cuda::device_free(ptr_, 0); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void upload(const std::vector<float>& v) {
    std::vector<unsigned char> bytes(n_ * itemsize(dtype_));
    kernels::cpu::cast(int64_t(n_), DType::f32, v.data(), dtype_, bytes.data());
    kernels::cuda::copy_host_to_device(ptr_, bytes.data(), bytes.size(), nullptr);
    kernels::cuda::synchronize_stream(nullptr);
  }
  // NaN everywhere (for floating dtypes), so an element a kernel forgets to write fails the test.
  void poison() { upload(std::vector<float>(n_, std::numeric_limits<float>::quiet_NaN())); }
  std::vector<float> download() const {
    std::vector<unsigned char> bytes(n_ * itemsize(dtype_));
    kernels::cuda::copy_device_to_host(bytes.data(), ptr_, bytes.size(), nullptr);
    kernels::cuda::synchronize_stream(nullptr);
    std::vector<float> out(n_);
    kernels::cpu::cast(int64_t(n_), dtype_, bytes.data(), DType::f32, out.data());
    return out;
  }
  template <typename T = void>
  T* get() const { return static_cast<T*>(ptr_); }

 private:
  size_t n_;
  DType dtype_;
  void* ptr_ = nullptr;
};

// Budgets for a result that sums `terms` products of unit-scale values: the rounding of each
// term adds up like a random walk, so the absolute budget grows with sqrt(terms).
inline Tolerance for_sum(Tolerance t, double terms) { return {t.atol * std::sqrt(std::max(terms, 1.0)), t.rtol}; }

}  // namespace cg::test
