// Finite-difference gradient checking in float64: the analytic gradient from backward() must
// match central differences of the op. The output is projected on fixed random weights so every
// output element contributes. Points where the op has a kink (ReLU at 0) are the caller's to
// avoid, by drawing inputs away from them.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "engine/random.h"
#include "engine/tensor.h"

namespace cg::test {

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

inline double project(const Tensor& out, const Tensor& weights) {
  const double* o = out.data<double>();
  const double* w = weights.data<double>();
  double s = 0;
  for (int64_t i = 0; i < out.numel(); ++i) s += o[i] * w[i];
  return s;
}

// Checks d(sum(fn(inputs) * w))/d(input) for every input that requires grad.
inline void expect_gradients_match(const OpFn& fn, std::vector<Tensor> inputs, double eps = 1e-6,
                                   double atol = 1e-7, double rtol = 1e-5) {
  Generator gen(1234);
  Tensor out = fn(inputs);
  ASSERT_EQ(out.dtype(), DType::f64) << "gradient checks run in float64";
  Tensor weights = Tensor::empty(out.shape(), DType::f64);
  normal_(weights, gen, 0.0, 1.0);
  for (auto& t : inputs)
    if (t.requires_grad()) t.impl().grad.reset();
  out.backward(weights);

  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor& x = inputs[k];
    if (!x.requires_grad()) continue;
    Tensor analytic = x.grad();
    ASSERT_TRUE(analytic.defined()) << "input " << k << " got no gradient";
    double* p = x.data<double>();
    double worst = 0;
    int64_t worst_i = -1;
    double worst_num = 0, worst_ana = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double saved = p[i];
      p[i] = saved + eps;
      const double plus = project(fn(inputs), weights);
      p[i] = saved - eps;
      const double minus = project(fn(inputs), weights);
      p[i] = saved;
      const double numeric = (plus - minus) / (2 * eps);
      const double ana = analytic.data<double>()[i];
      const double excess = std::abs(numeric - ana) - (atol + rtol * std::abs(numeric));
      if (excess > worst) {
        worst = excess;
        worst_i = i;
        worst_num = numeric;
        worst_ana = ana;
      }
    }
    EXPECT_EQ(worst_i, -1) << "input " << k << " " << x.str() << ": element " << worst_i
                           << " analytic " << worst_ana << " vs numeric " << worst_num
                           << " (over tolerance by " << worst << ")";
  }
}

// A float64 tensor of normal values; requires grad when asked.
inline Tensor random_f64(const Shape& shape, Generator& gen, bool requires_grad = true,
                         double mean = 0.0, double stddev = 1.0) {
  Tensor t = Tensor::empty(shape, DType::f64);
  normal_(t, gen, mean, stddev);
  if (requires_grad) t.set_requires_grad(true);
  return t;
}

}  // namespace cg::test
