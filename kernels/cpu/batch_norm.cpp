// Batch normalization, one channel at a time (channels are independent, so the parallel split
// over channels keeps results deterministic). Statistics and the backward's gradient sums
// accumulate in double, every term included, as PyTorch's: a channel can hold 64K activations,
// and float sums of that length lose digits PyTorch keeps.
#include "kernels/cpu/batch_norm.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "kernels/cpu/parallel.h"

namespace cg::kernels::cpu {
namespace {

// A channel's sum over its planes, in double as PyTorch's CPU batch norm sums: a
// channel of 1e4 + small noise, or a gradient whose halves nearly cancel, loses digits in float
// partial sums that PyTorch keeps. Each term is widened to double before it is added into 16
// double lanes (the compiler vectorizes that: float-to-double conversion and 16 independent adds;
// a plain double reduction would need -ffast-math reordering), kept in registers over a plane and
// stored between planes, so no plane pays for a horizontal reduction, which on 7x7 planes cost as
// much as the sums themselves. A plane's values past its last whole 16 go to a tail sum. The
// order depends on the shape only, so the result is deterministic.
class ChannelSum {
 public:
  static constexpr int kLanes = 16;
  // Adds term(j) (a double) for j < n.
  template <typename Term>
  void add_plane(int64_t n, Term term) {
    double lanes[kLanes];
    for (int l = 0; l < kLanes; ++l) lanes[l] = wide_[l];
    int64_t j = 0;
    for (; j + kLanes <= n; j += kLanes)
      for (int l = 0; l < kLanes; ++l) lanes[l] += term(j + l);
    for (int l = 0; l < kLanes; ++l) wide_[l] = lanes[l];
    for (; j < n; ++j) tail_ += term(j);
  }
  // Two sums in one pass over a plane (the backward's sum g and sum g * (x - mean)), so each
  // input is read once: adds term_a(j) to `a` and term_b(j) to `b`, in the order add_plane would.
  template <typename TermA, typename TermB>
  static void add_plane(ChannelSum& a, ChannelSum& b, int64_t n, TermA term_a, TermB term_b) {
    double lanes_a[kLanes], lanes_b[kLanes];
    for (int l = 0; l < kLanes; ++l) lanes_a[l] = a.wide_[l], lanes_b[l] = b.wide_[l];
    int64_t j = 0;
    for (; j + kLanes <= n; j += kLanes)
      for (int l = 0; l < kLanes; ++l) {
        lanes_a[l] += term_a(j + l);
        lanes_b[l] += term_b(j + l);
      }
    for (int l = 0; l < kLanes; ++l) a.wide_[l] = lanes_a[l], b.wide_[l] = lanes_b[l];
    for (; j < n; ++j) {
      a.tail_ += term_a(j);
      b.tail_ += term_b(j);
    }
  }
  double total() const {
    double t[kLanes];
    for (int l = 0; l < kLanes; ++l) t[l] = wide_[l];
    for (int width = kLanes / 2; width >= 1; width /= 2)
      for (int l = 0; l < width; ++l) t[l] += t[l + width];
    return t[0] + tail_;
  }

 private:
  double wide_[kLanes] = {};
  double tail_ = 0;
};

// Asks for the cache lines of the planes [p, p + hw), and of q's and r's unless null, ahead of
// their use. A
// channel's planes lie c * hw floats apart, so each pass jumps to a new plane every hw values,
// and the hardware prefetcher, which follows one stream at a time, starts each plane cold: on
// the narrow network's 7x7 to 28x28 planes, asking for plane i + 1 while plane i is summed made the
// backward 8-27% faster (1 core). Prefetches change no value.
template <typename T>
inline void prefetch_plane(int64_t hw, const T* p, const T* q = nullptr, const T* r = nullptr) {
  for (int64_t j = 0; j < hw; j += 64 / int64_t(sizeof(T))) {
    __builtin_prefetch(p + j);
    if (q) __builtin_prefetch(q + j);
    if (r) __builtin_prefetch(r + j);
  }
}

// The terms the channel sums add, each computed in double from T inputs: values, squared
// deviations from a shift, and products of a gradient with deviations.
template <typename T>
auto values(const T* p) {
  return [p](int64_t j) { return double(p[j]); };
}
template <typename T>
auto squared_deviations(const T* p, double shift) {
  return [p, shift](int64_t j) {
    const double d = double(p[j]) - shift;
    return d * d;
  };
}
template <typename T>
auto products_with_deviations(const T* g, const T* p, double shift) {
  return [g, p, shift](int64_t j) { return double(g[j]) * (double(p[j]) - shift); };
}

// Channel c's statistics in two passes over its planes, as PyTorch's: the sum, then the squared
// deviations from the mean (in double; the sum of squares would cancel for a channel far from 0).
struct ChannelMoments {
  double sum, sq, mean;
};
template <typename T>
ChannelMoments channel_moments(const BatchNormShape& s, const T* x, int64_t c) {
  const double m = double(s.n * s.hw);
  ChannelSum sums, squares;
  for (int64_t i = 0; i < s.n; ++i) {
    if (i + 1 < s.n) prefetch_plane(s.hw, x + ((i + 1) * s.c + c) * s.hw);
    sums.add_plane(s.hw, values(x + (i * s.c + c) * s.hw));
  }
  const double sum = sums.total();
  const double mean = m > 0 ? sum / m : 0.0;
  for (int64_t i = 0; i < s.n; ++i) {
    if (i + 1 < s.n) prefetch_plane(s.hw, x + ((i + 1) * s.c + c) * s.hw);
    squares.add_plane(s.hw, squared_deviations(x + (i * s.c + c) * s.hw, mean));
  }
  return {sum, squares.total(), mean};
}

// The smallest plane whose residual apply_affine prefetches: on 8x8 planes it cost 10% of the
// fused pass, on 32x32 planes it saved 18% (1 core, full network's shapes).
constexpr int64_t kPrefetchResidualMin = 128;

// y = act(x * scale + shift [+ residual]) over channel c. The sum and the ReLU are written as
// the separate add/add_relu kernels write them (kernels/cpu/elementwise.cpp), so the fused pass
// gives the same bits, signed zeros included.
template <typename T>
void apply_affine(const BatchNormShape& s, const T* x, int64_t c, T scale, T shift, Activation act,
                  const T* residual, T* y) {
  for (int64_t i = 0; i < s.n; ++i) {
    const int64_t at = (i * s.c + c) * s.hw;
    const T* p = x + at;
    T* q = y + at;
    if (residual && s.hw >= kPrefetchResidualMin && i + 1 < s.n) prefetch_plane(s.hw, residual + at + s.c * s.hw);
    if (residual) {
      const T* r = residual + at;
      for (int64_t j = 0; j < s.hw; ++j) {
        const T normalized = p[j] * scale + shift;
        const T sum = normalized + r[j];
        q[j] = act == Activation::relu ? (sum > T(0) ? sum : T(0)) : sum;
      }
    } else if (act == Activation::relu) {
      for (int64_t j = 0; j < s.hw; ++j) q[j] = std::max(p[j] * scale + shift, T(0));
    } else {
      for (int64_t j = 0; j < s.hw; ++j) q[j] = p[j] * scale + shift;
    }
  }
}

}  // namespace

template <typename T>
void batch_norm_forward_train(const BatchNormShape& s, const T* x, const T* gamma, const T* beta,
                             T eps, T momentum, T* running_mean, T* running_var, T* y,
                             T* save_mean, T* save_invstd, Activation act, const T* residual) {
  const double m = double(s.n * s.hw);
  parallel_for(s.c, 1, [=](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      const ChannelMoments cm = channel_moments(s, x, c);
      const double mean = cm.mean, sq = cm.sq;
      const double var = sq / m;  // biased: what normalization uses
      const T invstd = T(1.0 / std::sqrt(var + double(eps)));
      save_mean[c] = T(mean);
      save_invstd[c] = invstd;
      if (running_mean) running_mean[c] = (T(1) - momentum) * running_mean[c] + momentum * T(mean);
      if (running_var) {
        const double unbiased = m > 1 ? sq / (m - 1) : var;
        running_var[c] = (T(1) - momentum) * running_var[c] + momentum * T(unbiased);
      }
      const T scale = gamma[c] * invstd, shift = beta[c] - T(mean) * scale;
      apply_affine(s, x, c, scale, shift, act, residual, y);
    }
  });
}

template <typename T>
void batch_norm_forward_eval(const BatchNormShape& s, const T* x, const T* gamma, const T* beta,
                            const T* running_mean, const T* running_var, T eps, T* y,
                            Activation act, const T* residual) {
  parallel_for(s.c, 1, [=](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      const T scale = gamma[c] / std::sqrt(running_var[c] + eps);
      const T shift = beta[c] - running_mean[c] * scale;
      apply_affine(s, x, c, scale, shift, act, residual, y);
    }
  });
}

// Where the gradient reaching the normalization lives: dy, or with a ReLU (its backward done
// before the batch norm's) dy masked by relu_y > 0, held in d_residual when there is one, else in
// dx (every element of dx is rewritten later from its own masked value only, so sharing the
// buffer is safe).
template <typename T>
const T* grad_reaching_norm(const T* dy, const T* relu_y, const T* d_residual, const T* dx) {
  if (!relu_y) return dy;
  return d_residual ? d_residual : dx;
}

// Without a ReLU the residual's gradient is dy itself: a copy into d_residual when there is one.
template <typename T>
void copy_to_residual(const BatchNormShape& s, const T* dy, const T* relu_y, T* d_residual) {
  if (!relu_y && d_residual) std::copy(dy, dy + s.n * s.c * s.hw, d_residual);
}

// Plane `at` (its offset) of the gradient reaching the normalization. With a ReLU the plane is
// masked into its place (grad_reaching_norm) here, just before its first reader, while it is in
// the cache, instead of in a pass of its own over the whole tensor.
template <typename T>
const T* grad_plane(int64_t at, int64_t hw, const T* dy, const T* relu_y, T* d_residual, T* dx) {
  if (!relu_y) return dy + at;
  T* out = (d_residual ? d_residual : dx) + at;
  for (int64_t j = 0; j < hw; ++j) out[j] = relu_y[at + j] > T(0) ? dy[at + j] : T(0);
  return out;
}

// Over channel c: sum(g) and sum(g * (x - mean)) of the gradient reaching the normalization,
// masking it into place plane by plane (grad_plane).
template <typename T>
std::pair<double, double> channel_grad_sums(const BatchNormShape& s, int64_t c, const T* dy, const T* x, double mean,
                                            const T* relu_y, T* d_residual, T* dx) {
  ChannelSum sum_g, sum_gx;
  for (int64_t i = 0; i < s.n; ++i) {
    const int64_t at = (i * s.c + c) * s.hw;
    if (i + 1 < s.n) {
      const int64_t next = at + s.c * s.hw;
      prefetch_plane(s.hw, dy + next, x + next, relu_y ? relu_y + next : nullptr);
    }
    const T* g = grad_plane(at, s.hw, dy, relu_y, d_residual, dx);
    ChannelSum::add_plane(sum_g, sum_gx, s.hw, values(g), products_with_deviations(g, x + at, mean));
  }
  return {sum_g.total(), sum_gx.total()};
}

template <typename T>
void batch_norm_backward_train(const BatchNormShape& s, const T* dy, const T* x, const T* gamma,
                              const T* save_mean, const T* save_invstd, T* dx, T* dgamma,
                              T* dbeta, const T* relu_y, T* d_residual) {
  const double m = double(s.n * s.hw);
  copy_to_residual(s, dy, relu_y, d_residual);
  const T* grad = grad_reaching_norm<T>(dy, relu_y, d_residual, dx);
  parallel_for(s.c, 1, [=](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      const double mean = double(save_mean[c]), invstd = double(save_invstd[c]);
      auto [sum_dy, sum_dy_xhat] = channel_grad_sums(s, c, dy, x, mean, relu_y, d_residual, dx);
      sum_dy_xhat *= invstd;
      dbeta[c] = T(sum_dy);
      dgamma[c] = T(sum_dy_xhat);
      // dx = gamma * invstd * (dy - mean(dy) - xhat * mean(dy * xhat))
      const T k = T(double(gamma[c]) * invstd);
      const T mean_dy = T(sum_dy / m), proj = T(sum_dy_xhat / m * invstd);
      const T mu = T(mean);
      for (int64_t i = 0; i < s.n; ++i) {
        const T* g = grad + (i * s.c + c) * s.hw;
        const T* p = x + (i * s.c + c) * s.hw;
        T* q = dx + (i * s.c + c) * s.hw;
        if (i + 1 < s.n) prefetch_plane(s.hw, g + s.c * s.hw, p + s.c * s.hw);
        for (int64_t j = 0; j < s.hw; ++j) q[j] = k * (g[j] - mean_dy - (p[j] - mu) * proj);
      }
    }
  });
}

template <typename T>
void batch_norm_backward_eval(const BatchNormShape& s, const T* dy, const T* x, const T* gamma,
                             const T* running_mean, const T* running_var, T eps, T* dx,
                             T* dgamma, T* dbeta, const T* relu_y, T* d_residual) {
  copy_to_residual(s, dy, relu_y, d_residual);
  parallel_for(s.c, 1, [=](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      const T invstd = T(1) / std::sqrt(running_var[c] + eps);
      const T k = gamma[c] * invstd;
      double sum_dy = 0, sum_dy_xhat = 0;
      for (int64_t i = 0; i < s.n; ++i) {
        const T* g = grad_plane((i * s.c + c) * s.hw, s.hw, dy, relu_y, d_residual, dx);
        const T* p = x + (i * s.c + c) * s.hw;
        T* q = dx + (i * s.c + c) * s.hw;
        for (int64_t j = 0; j < s.hw; ++j) {
          sum_dy += double(g[j]);
          sum_dy_xhat += double(g[j]) * double((p[j] - running_mean[c]) * invstd);
          q[j] = g[j] * k;
        }
      }
      dbeta[c] = T(sum_dy);
      dgamma[c] = T(sum_dy_xhat);
    }
  });
}


// ---------------------------------------------------------------------------------------------
// SyncBatchNorm's phases (see the header). Same per-channel split and lane sums as above.

template <typename T>
void batch_norm_local_moments(const BatchNormShape& s, const T* x, double* moments) {
  const double m = double(s.n * s.hw);
  parallel_for(s.c, 1, [=](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      const ChannelMoments cm = channel_moments(s, x, c);  // the deviations from the local mean
      const double sum = cm.sum, sq = cm.sq, a = cm.mean;
      moments[c] = sum;
      // sum x^2 = sum (x - a)^2 + 2 a sum x - m a^2, in double. The replicas' moments are added
      // by the collective, so the variance comes from sum x^2 / m - mean^2: exact to a relative
      // (mean / sd)^2 * 2^-52, which only a channel 1e4 standard deviations from 0 notices.
      moments[s.c + c] = sq + 2.0 * a * sum - m * a * a;
    }
  });
  moments[2 * s.c] = m;
}

template <typename T>
void batch_norm_forward_with_moments(const BatchNormShape& s, const T* x, const T* gamma, const T* beta, T eps,
                                    T momentum, const double* moments, T* running_mean, T* running_var, T* y,
                                    T* save_mean, T* save_invstd, Activation act, const T* residual) {
  const double m = moments[2 * s.c];
  parallel_for(s.c, 1, [=](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      const double mean = moments[c] / m;
      const double var = std::max(moments[s.c + c] / m - mean * mean, 0.0);  // biased
      const T invstd = T(1.0 / std::sqrt(var + double(eps)));
      save_mean[c] = T(mean);
      save_invstd[c] = invstd;
      if (running_mean) running_mean[c] = (T(1) - momentum) * running_mean[c] + momentum * T(mean);
      if (running_var) {
        const double unbiased = m > 1 ? var * m / (m - 1) : var;
        running_var[c] = (T(1) - momentum) * running_var[c] + momentum * T(unbiased);
      }
      const T scale = gamma[c] * invstd, shift = beta[c] - T(mean) * scale;
      apply_affine(s, x, c, scale, shift, act, residual, y);
    }
  });
}

template <typename T>
void batch_norm_local_grad_sums(const BatchNormShape& s, const T* dy, const T* x, const T* save_mean,
                               const T* save_invstd, T* dgamma, T* dbeta, double* sums, T* dx, const T* relu_y,
                               T* d_residual) {
  copy_to_residual(s, dy, relu_y, d_residual);
  parallel_for(s.c, 1, [=](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      auto [sum_g, sum_gx] = channel_grad_sums(s, c, dy, x, double(save_mean[c]), relu_y, d_residual, dx);
      sum_gx *= double(save_invstd[c]);
      dbeta[c] = T(sum_g);
      dgamma[c] = T(sum_gx);
      sums[c] = sum_g;
      sums[s.c + c] = sum_gx;
    }
  });
}

template <typename T>
void batch_norm_backward_with_sums(const BatchNormShape& s, const T* dy, const T* x, const T* gamma,
                                  const T* save_mean, const T* save_invstd, const double* sums, double count,
                                  T* dx, const T* relu_y, const T* d_residual) {
  const T* g_all = grad_reaching_norm(dy, relu_y, d_residual, dx);
  parallel_for(s.c, 1, [=](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      const double invstd = double(save_invstd[c]);
      // dx = gamma * invstd * (g - mean(g) - xhat * mean(g * xhat)), means over every replica.
      const T k = T(double(gamma[c]) * invstd);
      const T mean_g = T(sums[c] / count), proj = T(sums[s.c + c] / count * invstd);
      const T mu = save_mean[c];
      for (int64_t i = 0; i < s.n; ++i) {
        const T* g = g_all + (i * s.c + c) * s.hw;
        const T* p = x + (i * s.c + c) * s.hw;
        T* q = dx + (i * s.c + c) * s.hw;
        for (int64_t j = 0; j < s.hw; ++j) q[j] = k * (g[j] - mean_g - (p[j] - mu) * proj);
      }
    }
  });
}

#define CG_INSTANTIATE(T)                                                                        \
  template void batch_norm_forward_train<T>(const BatchNormShape&, const T*, const T*, const T*, \
                                           T, T, T*, T*, T*, T*, T*, Activation, const T*);     \
  template void batch_norm_forward_eval<T>(const BatchNormShape&, const T*, const T*, const T*,  \
                                          const T*, const T*, T, T*, Activation, const T*);     \
  template void batch_norm_backward_train<T>(const BatchNormShape&, const T*, const T*,          \
                                            const T*, const T*, const T*, T*, T*, T*, const T*, \
                                            T*);                                                \
  template void batch_norm_backward_eval<T>(const BatchNormShape&, const T*, const T*, const T*, \
                                           const T*, const T*, T, T*, T*, T*, const T*, T*);      \
  template void batch_norm_local_moments<T>(const BatchNormShape&, const T*, double*);             \
  template void batch_norm_forward_with_moments<T>(const BatchNormShape&, const T*, const T*,      \
                                                  const T*, T, T, const double*, T*, T*, T*, T*, \
                                                  T*, Activation, const T*);                     \
  template void batch_norm_local_grad_sums<T>(const BatchNormShape&, const T*, const T*,           \
                                             const T*, const T*, T*, T*, double*, T*, const T*,  \
                                             T*);                                                \
  template void batch_norm_backward_with_sums<T>(const BatchNormShape&, const T*, const T*,        \
                                                const T*, const T*, const T*, const double*,     \
                                                double, T*, const T*, const T*);
CG_INSTANTIATE(float)
CG_INSTANTIATE(double)
#undef CG_INSTANTIATE

}  // namespace cg::kernels::cpu
