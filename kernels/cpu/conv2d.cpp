// The plain convolution reference (conv2d.h), written as the definition:
//   y[n,o,p,q] = b[o] + sum over c, i, j of x[n, c, p*stride - pad + i, q*stride - pad + j] * w[o,c,i,j]
// with taps falling outside the image contributing nothing. One walker visits every tap that
// contributes; forward, backward-data and backward-filter are each one product summed into their
// output at the tap. No blocking, no vectors, no scratch: speed is the fast kernels' job.
#include "kernels/cpu/conv2d.h"

#include <vector>

namespace cg::kernels::cpu {
namespace {

struct Range {
  int64_t begin, end;
};

// Calls f(x index, w index, y index) for every tap of images `images` and output channels `outs`
// whose input position falls inside the image, in one fixed order: image, output channel, output
// row, output column, input channel, kernel row, kernel column.
template <typename F>
void for_each_tap(const Conv2dShape& s, Range images, Range outs, const F& f) {
  const int64_t oh = s.out_h(), ow = s.out_w();
  for (int64_t n = images.begin; n < images.end; ++n)
    for (int64_t o = outs.begin; o < outs.end; ++o)
      for (int64_t p = 0; p < oh; ++p)
        for (int64_t q = 0; q < ow; ++q)
          for (int64_t c = 0; c < s.c_in; ++c)
            for (int64_t i = 0; i < s.kh; ++i)
              for (int64_t j = 0; j < s.kw; ++j) {
                const int64_t iy = p * s.stride - s.pad + i, ix = q * s.stride - s.pad + j;
                if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                f(((n * s.c_in + c) * s.h + iy) * s.w + ix, ((o * s.c_in + c) * s.kh + i) * s.kw + j,
                  ((n * s.c_out + o) * oh + p) * ow + q);
              }
}

// The sums run in double and are rounded once into `out`.
template <typename T>
void round_into(const std::vector<double>& sums, T* out) {
  for (size_t i = 0; i < sums.size(); ++i) out[i] = T(sums[i]);
}

// Threads only where there is work enough to pay for starting them (a gradient check calls the
// reference thousands of times on tiny layers): a few million taps.
bool worth_threads(const Conv2dShape& s) {
  return s.n * s.c_out * s.out_h() * s.out_w() * s.c_in * s.kh * s.kw > (int64_t(1) << 22);
}

}  // namespace

// Threads split the outputs, each summing its own in the walker's order: images and output
// channels for forward, images for backward-data, output channels for backward-filter. So every
// sum runs in the same order whatever the thread count.
template <typename T>
void conv2d_forward(const Conv2dShape& s, const T* x, const T* w, const T* bias, T* y) {
  const int64_t plane = s.out_h() * s.out_w();
  std::vector<double> sums(size_t(s.n * s.c_out * plane));
  for (size_t i = 0; i < sums.size(); ++i) sums[i] = bias ? double(bias[(int64_t(i) / plane) % s.c_out]) : 0.0;
#pragma omp parallel for collapse(2) schedule(static) if (worth_threads(s))
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t o = 0; o < s.c_out; ++o)
      for_each_tap(s, {n, n + 1}, {o, o + 1},
                   [&](int64_t xi, int64_t wi, int64_t yi) { sums[size_t(yi)] += double(x[xi]) * double(w[wi]); });
  round_into(sums, y);
}

template <typename T>
void conv2d_backward_data(const Conv2dShape& s, const T* dy, const T* w, T* dx) {
  std::vector<double> sums(size_t(s.n * s.c_in * s.h * s.w), 0.0);
#pragma omp parallel for schedule(static) if (worth_threads(s))
  for (int64_t n = 0; n < s.n; ++n)
    for_each_tap(s, {n, n + 1}, {0, s.c_out},
                 [&](int64_t xi, int64_t wi, int64_t yi) { sums[size_t(xi)] += double(dy[yi]) * double(w[wi]); });
  round_into(sums, dx);
}

template <typename T>
void conv2d_backward_filter(const Conv2dShape& s, const T* x, const T* dy, T* dw, T* db) {
  std::vector<double> sums(size_t(s.c_out * s.c_in * s.kh * s.kw), 0.0);
#pragma omp parallel for schedule(static) if (worth_threads(s))
  for (int64_t o = 0; o < s.c_out; ++o)
    for_each_tap(s, {0, s.n}, {o, o + 1},
                 [&](int64_t xi, int64_t wi, int64_t yi) { sums[size_t(wi)] += double(dy[yi]) * double(x[xi]); });
  round_into(sums, dw);
  if (db) conv2d_bias_gradient(s, dy, db);
}

template <typename T>
void conv2d_bias_gradient(const Conv2dShape& s, const T* dy, T* db) {
  const int64_t ohw = s.out_h() * s.out_w();
  for (int64_t c = 0; c < s.c_out; ++c) {
    T acc = 0;
    for (int64_t i = 0; i < s.n; ++i) {
      const T* g = dy + (i * s.c_out + c) * ohw;
      for (int64_t p = 0; p < ohw; ++p) acc += g[p];
    }
    db[c] = acc;
  }
}

#define CG_INSTANTIATE(T)                                                                      \
  template void conv2d_forward<T>(const Conv2dShape&, const T*, const T*, const T*, T*);      \
  template void conv2d_backward_data<T>(const Conv2dShape&, const T*, const T*, T*);          \
  template void conv2d_backward_filter<T>(const Conv2dShape&, const T*, const T*, T*, T*);    \
  template void conv2d_bias_gradient<T>(const Conv2dShape&, const T*, T*);
CG_INSTANTIATE(float)
CG_INSTANTIATE(double)
#undef CG_INSTANTIATE

}  // namespace cg::kernels::cpu
