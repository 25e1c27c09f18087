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

#include "kernels/cpu/conv2d.h"
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

// The plain reference's float64 results (kernels/cpu/conv2d.h) for one shape, on fixed random
// data, and each pass's scale (the same convolution of |x|, |w|, |dy|, its largest element, plus
// the largest |bias| for the forward). Computed once per shape: the float64 loops cost far more
// than the algorithms they check, and every algorithm of a test is held to the same reference.
struct ConvReference {
  kernels::Conv2dShape s;
  bool with_bias;
  std::vector<float> x, w, b, dy;
  std::vector<double> y, dx, dw;
  double y_scale = 0, dx_scale = 0, dw_scale = 0;

  ConvReference(const kernels::Conv2dShape& shape, bool bias) : s(shape), with_bias(bias) {
    namespace cpu = kernels::cpu;
    const size_t xn = size_t(s.n * s.c_in * s.h * s.w), wn = size_t(s.c_out * s.c_in * s.kh * s.kw);
    const size_t yn = size_t(s.n * s.c_out * s.out_h() * s.out_w()), bn = size_t(s.c_out);
    x = random_vector<float>(xn, 11), w = random_vector<float>(wn, 12);
    b = random_vector<float>(bn, 13), dy = random_vector<float>(yn, 14);
    const auto xd = to_double(x), wd = to_double(w), bd = to_double(b), dyd = to_double(dy);
    y.resize(yn), dx.resize(xn), dw.resize(wn);
    std::vector<double> db(bn), sy(yn), sdx(xn), sdw(wn);
    cpu::conv2d_forward<double>(s, xd.data(), wd.data(), with_bias ? bd.data() : nullptr, y.data());
    cpu::conv2d_backward_data<double>(s, dyd.data(), wd.data(), dx.data());
    cpu::conv2d_backward_filter<double>(s, xd.data(), dyd.data(), dw.data(), db.data());
    const auto ax = absolute(xd), aw = absolute(wd), ady = absolute(dyd);
    cpu::conv2d_forward<double>(s, ax.data(), aw.data(), nullptr, sy.data());
    cpu::conv2d_backward_data<double>(s, ady.data(), aw.data(), sdx.data());
    cpu::conv2d_backward_filter<double>(s, ax.data(), ady.data(), sdw.data(), nullptr);
    y_scale = max_of(sy) + (with_bias ? max_of(absolute(bd)) : 0.0);
    dx_scale = max_of(sdx), dw_scale = max_of(sdw);
  }
};

// One algorithm's float32 errors against the reference, each relative to its pass's scale. Checks
// on the way that every output is written (they start as NaN, which counts as infinite) and, with
// a bias, that its gradient is the reference's plain sum of dy to the bit, as every CPU
// algorithm's is.
struct ConvErrors {
  double forward = 0, backward_data = 0, backward_filter = 0;
};
inline ConvErrors errors_against(const ConvReference& r, const ConvKernels& k, const char* name) {
  const auto& s = r.s;
  const size_t bn = size_t(s.c_out);
  auto y = nan_filled(r.y.size()), dx = nan_filled(r.dx.size()), dw = nan_filled(r.dw.size()), db = nan_filled(bn);
  k.forward(s, r.x.data(), r.w.data(), r.with_bias ? r.b.data() : nullptr, y.data());
  k.backward_data(s, r.dy.data(), r.w.data(), dx.data());
  k.backward_filter(s, r.x.data(), r.dy.data(), dw.data(), r.with_bias ? db.data() : nullptr);
  if (r.with_bias) {
    std::vector<float> reference_db(bn);
    kernels::cpu::conv2d_bias_gradient<float>(s, r.dy.data(), reference_db.data());
    EXPECT_EQ(0, std::memcmp(db.data(), reference_db.data(), bn * sizeof(float))) << name << " bias gradient";
  }
  return {relative_error(y, r.y, r.y_scale), relative_error(dx, r.dx, r.dx_scale),
          relative_error(dw, r.dw, r.dw_scale)};
}

// all_outputs on 1, 2 and 3 threads, bit for bit; leaves OpenMP at 2 threads.
inline void expect_bit_identical_across_threads(const ConvKernels& k, const kernels::Conv2dShape& s) {
  const auto one = all_outputs(k, s, 1), two = all_outputs(k, s, 2), three = all_outputs(k, s, 3);
  omp_set_num_threads(2);
  EXPECT_EQ(0, std::memcmp(one.data(), two.data(), one.size() * sizeof(float))) << "1 and 2 threads";
  EXPECT_EQ(0, std::memcmp(one.data(), three.data(), one.size() * sizeof(float))) << "1 and 3 threads";
}

}  // namespace cg::test
