// The three kernels of one CPU convolution algorithm (forward, backward-data, backward-filter),
// and the determinism check every algorithm's kernel test runs on them: results must not depend
// on the thread count (resume is bit-exact only then); and the helpers of their error checks.
#pragma once
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/types.h"
#include "support/random_data.h"

namespace cg::test {

// What the algorithms' error checks share: a result compared with the plain reference's float64
// one, relative to a scale (the same convolution of |x|, |w|, |dy|, its largest element).
inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }
inline std::vector<double> absolute(const std::vector<double>& v) {
  std::vector<double> a(v.size());
  for (size_t i = 0; i < v.size(); ++i) a[i] = std::abs(v[i]);
  return a;
}
inline double max_of(const std::vector<double>& v) {
  double m = 0;
  for (double e : v) m = std::max(m, e);
  return m;
}
// max |got - ref| / scale; a NaN (an output left unwritten) counts as infinite.
inline double relative_error(const std::vector<float>& got, const std::vector<double>& ref, double scale) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(double(got[i]) - ref[i]);
    worst = std::isnan(err) ? INFINITY : std::max(worst, err);
  }
  return worst / scale;
}
// Outputs poisoned with NaN, so that an element a kernel does not write shows.
inline std::vector<float> nan_filled(size_t n) { return std::vector<float>(n, NAN); }

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
