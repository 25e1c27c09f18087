#include "data/random.h"

#include <cmath>
#include <numbers>

namespace cg::data {

double SampleRng::normal() {
  const double u1 = 1.0 - uniform(), u2 = uniform();  // u1 in (0, 1]: the log stays finite
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace cg::data
