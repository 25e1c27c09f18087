// The three kernels of one CPU convolution algorithm (forward, backward-data, backward-filter),
// and the determinism check every algorithm's kernel test runs on them: results must not depend
// on the thread count (resume is bit-exact only then).
#pragma once
#include <gtest/gtest.h>
#include <omp.h>

#include <cstring>
#include <vector>

#include "kernels/types.h"
#include "support/random_data.h"

namespace cg::test {

struct ConvKernels {
  void (*forward)(const kernels::Conv2dShape&, const float* x, const float* w, const float* bias, float* y);
  void (*backward_data)(const kernels::Conv2dShape&, const float* dy, const float* w, float* dx);
  void (*backward_filter)(const kernels::Conv2dShape&, const float* x, const float* dy, float* dw, float* db);
};

// y, dx, dw and db, one after the other, from one call of each kernel on fixed random data with
// `threads` OpenMP threads.
inline std::vector<float> all_outputs(const ConvKernels& k, const kernels::Conv2dShape& s, int threads) {
  const size_t xn = size_t(s.n * s.c_in * s.h * s.w), wn = size_t(s.c_out * s.c_in * s.kh * s.kw);
  const size_t yn = size_t(s.n * s.c_out * s.out_h() * s.out_w());
  const auto x = random_vector<float>(xn, 5), w = random_vector<float>(wn, 6), dy = random_vector<float>(yn, 7);
  omp_set_num_threads(threads);
  std::vector<float> y(yn), dx(xn), dw(wn), db(size_t(s.c_out));
  k.forward(s, x.data(), w.data(), nullptr, y.data());
  k.backward_data(s, dy.data(), w.data(), dx.data());
  k.backward_filter(s, x.data(), dy.data(), dw.data(), db.data());
  for (const auto* part : {&dx, &dw, &db}) y.insert(y.end(), part->begin(), part->end());
  return y;
}

// all_outputs on 1, 2 and 3 threads, bit for bit; leaves OpenMP at 2 threads.
inline void expect_bit_identical_across_threads(const ConvKernels& k, const kernels::Conv2dShape& s) {
  const auto one = all_outputs(k, s, 1), two = all_outputs(k, s, 2), three = all_outputs(k, s, 3);
  omp_set_num_threads(2);
  EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(float))) << "1 and 2 threads";
  EXPECT_EQ(0, std::memcmp(one.data(), three.data(), one.size() * sizeof(float))) << "1 and 3 threads";
}

}  // namespace cg::test
