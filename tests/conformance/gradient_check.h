// The float64 references' own check: the analytic gradient a reference's backward gives must
// match central differences of its forward, projected on the output gradient it was given
// (every output element contributes). The implementations are then held to the analytic one.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace cg::test {

using Inputs = std::vector<std::vector<double>>;
using ReferenceForward = std::function<std::vector<double>(const Inputs&)>;

inline double projected(const std::vector<double>& y, const std::vector<double>& dy) {
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += y[i] * dy[i];
  return s;
}

// For each input k named in `names`: d(sum(forward(inputs) * dy)) / d(inputs[k]) against
// analytic[k]. Points where the forward has a kink (ReLU at 0) are the caller's to avoid.
inline void expect_finite_differences_match(const ReferenceForward& forward, Inputs inputs,
                                            const std::vector<double>& dy, const Inputs& analytic,
                                            const std::vector<std::string>& names, double eps = 1e-6) {
  for (size_t k = 0; k < names.size(); ++k) {
    double worst = 0;
    size_t worst_i = 0;
    for (size_t i = 0; i < inputs[k].size(); ++i) {
      const double saved = inputs[k][i];
      inputs[k][i] = saved + eps;
      const double plus = projected(forward(inputs), dy);
      inputs[k][i] = saved - eps;
      const double minus = projected(forward(inputs), dy);
      inputs[k][i] = saved;
      const double numeric = (plus - minus) / (2 * eps);
      const double excess = std::abs(numeric - analytic[k][i]) - (1e-6 + 1e-5 * std::abs(numeric));
      if (excess > worst) {
        worst = excess;
        worst_i = i;
      }
    }
    EXPECT_EQ(worst, 0.0) << names[k] << "[" << worst_i << "]: analytic " << analytic[k][worst_i]
                          << " disagrees with central differences by more than the budget";
  }
}

}  // namespace cg::test
