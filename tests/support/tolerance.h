// One tolerance rule for comparing a kernel with its reference, |a - b| <= atol + rtol * |ref|,
// with one table of per-dtype budgets; a failure names the worst element and by how much it
// exceeds its budget.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace cg::test {

struct Tolerance {
  double atol, rtol;
};
template <typename T> constexpr Tolerance tolerance_for();
template <> constexpr Tolerance tolerance_for<float>() { return {1e-4, 1e-4}; }
template <> constexpr Tolerance tolerance_for<double>() { return {1e-10, 1e-10}; }
// Half types: results rounded to 11 (f16) or 8 (bf16) significant bits, after fp32 accumulation
// in another order than the reference. Compare them as float vectors with these budgets.
constexpr Tolerance kToleranceF16{2e-3, 4e-3};
constexpr Tolerance kToleranceBF16{1.6e-2, 3.2e-2};

// ||got - want|| / ||want|| in double (L2 over all elements): how far a whole run's weights drift
// from a reference run's whose sums were added in another order.
inline double relative_l2(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    diff += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    norm += double(want[i]) * want[i];
  }
  return std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
}

// Outputs are filled with NaN before a kernel runs, so an element it fails to write fails here.
template <typename T>
std::vector<T> poisoned(size_t n) {
  return std::vector<T>(n, std::numeric_limits<T>::quiet_NaN());
}

template <typename T>
::testing::AssertionResult all_close(const std::vector<T>& got, const std::vector<T>& ref,
                                     Tolerance tol = tolerance_for<T>()) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " vs " << ref.size();
  double worst = 0;
  size_t worst_i = 0;
  bool bad = false;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(double(got[i]) - double(ref[i]));
    const double excess = err - (tol.atol + tol.rtol * std::abs(double(ref[i])));
    if (!(excess <= 0) && (!bad || !(excess <= worst))) {  // NaN counts as the worst
      worst = excess;
      worst_i = i;
      bad = true;
    }
  }
  if (!bad) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "element " << worst_i << ": got " << got[worst_i] << ", reference "
                                       << ref[worst_i] << ", over budget by " << worst;
}

}  // namespace cg::test
