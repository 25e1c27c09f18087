#include "engine/random.h"

#include <sstream>

namespace cg {

std::string Generator::state() const {
  std::ostringstream out;
  out << engine_;
  return out.str();
}

void Generator::set_state(const std::string& state) {
  std::istringstream in(state);
  in >> engine_;
  CG_CHECK(!in.fail(), "malformed random generator state");
}

namespace {
template <typename Dist>
void fill_with(Tensor& t, Generator& gen, Dist dist) {
  CG_CHECK(t.device().is_cpu(), "random fill needs a CPU tensor, got {}", t.str());
  if (t.dtype() == DType::f32) {
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = float(dist(gen.engine()));
  } else {
    double* p = t.data<double>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(gen.engine());
  }
}
}  // namespace

void normal_(Tensor& t, Generator& gen, double mean, double stddev) {
  fill_with(t, gen, std::normal_distribution<double>(mean, stddev));
}

void uniform_(Tensor& t, Generator& gen, double low, double high) {
  fill_with(t, gen, std::uniform_real_distribution<double>(low, high));
}

}  // namespace cg
