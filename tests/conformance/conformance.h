// What every conformance suite shares: its cases (implementation x problem of the family's table x
// dtype x layout, those the implementation supports), their names, the dtypes each device runs,
// the tolerance rule against a float64 reference, and the conversions between the reference's
// plain double vectors and tensors.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "support/tolerance.h"
#include "conformance/implementations.h"
#include "util/layout.h"

namespace cg::test {

// One case: `c` (a row of the family's table, with a `name`) run by `implementation` in `dtype`
// and `layout`. `refused`: an implementation that refuses every row here, or a device with no
// implementation registered, gets one case that skips, saying why.
template <typename Interface, typename Case>
struct Param {
  Implementation<Interface> implementation;
  Case c;
  DType dtype = DType::f32;
  Layout layout = Layout::nchw;
  std::string refused;
};

// How GoogleTest prints a case (listings, failures): its implementation, row and dtype, or why
// the implementation runs nothing here.
template <typename Interface, typename Case>
void PrintTo(const Param<Interface, Case>& p, std::ostream* os) {
  if (!p.refused.empty()) {
    *os << p.implementation.name << " " << p.refused;
    return;
  }
  *os << p.implementation.name << ", " << p.c.name << ", " << dtype_name(p.dtype)
      << (p.layout == Layout::nhwc ? ", channels-last" : "");
}

// The dtypes each device's implementations are tried in (each runs those it supports).
inline std::vector<DType> dtypes_on(DeviceType device) {
  if (device == DeviceType::cpu) return {DType::f32, DType::f64};
  return {DType::f32, DType::f16, DType::bf16};
}

inline Device device_of(DeviceType type) { return type == DeviceType::cpu ? Device::cpu() : Device::cuda(0); }

// Every (implementation on `device`, row, dtype, layout) that the implementation supports, asked
// through its own supports() with `problem_of(row, dtype, layout, device, policy)`, the policy being
// the implementation's. An implementation that refuses every row gets one case that skips with its
// explain(); a device with nothing registered (the GPU in a CPU-only build) one that says so.
template <typename Interface, typename Case, typename ProblemOf>
std::vector<Param<Interface, Case>> params_of(const impl::Registry<Interface>& registry, DeviceType device,
                                              const std::vector<Case>& rows, const std::vector<Layout>& layouts,
                                              const ProblemOf& problem_of) {
  std::vector<Param<Interface, Case>> out;
  for (const Implementation<Interface>& im : implementations_of(registry)) {
    if (im.device != device) continue;
    std::string why;
    const size_t before = out.size();
    for (const Case& c : rows)
      for (DType dtype : dtypes_on(device))
        for (Layout layout : layouts) {
          const auto problem = problem_of(c, dtype, layout, device_of(device), im.policy);
          if (im.impl->supports(problem)) out.push_back({im, c, dtype, layout, ""});
          else if (why.empty()) why = im.impl->explain(problem);
        }
    if (out.size() == before)
      out.push_back({im, rows.front(), DType::f32, Layout::nchw, "runs none of the table's cases (" + why + ")"});
  }
  if (out.empty())
    out.push_back({{"none registered", device, nullptr}, rows.front(), DType::f32, Layout::nchw,
                   "for " + registry.family() + " on " + device_of(device).str() +
                       " in this build (a CUDA build registers them)"});
  return out;
}

// A switched family's cases: every row in each of `dtypes` and `layouts`, run by `device`'s ops.
template <typename Case>
std::vector<Param<DeviceSwitch, Case>> device_params(DeviceType device, const std::vector<Case>& rows,
                                                     const std::vector<DType>& dtypes,
                                                     const std::vector<Layout>& layouts = {Layout::nchw}) {
  std::vector<Param<DeviceSwitch, Case>> out;
  for (const Case& c : rows)
    for (DType dtype : dtypes)
      for (Layout layout : layouts) out.push_back({device_implementation(device), c, dtype, layout, ""});
  return out;
}

// A case's name, "cpu_channels_last_winograd_stem3x3_float32_nhwc" (GoogleTest takes letters,
// digits and '_'): INSTANTIATE_TEST_SUITE_P's last argument.
struct ParamName {
  template <typename Interface, typename Case>
  std::string operator()(const ::testing::TestParamInfo<Param<Interface, Case>>& info) const {
    const Param<Interface, Case>& p = info.param;
    std::string name = p.implementation.name + "_";
    if (p.refused.empty()) name += p.c.name + "_" + std::string(dtype_name(p.dtype));
    else if (p.implementation.impl) name += "unavailable";
    else name.pop_back();  // "none registered"
    if (p.refused.empty() && p.layout == Layout::nhwc) name += "_nhwc";
    for (char& ch : name)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    return name;
  }
};

// The budget of an implementation computing in `dtype` on `device` against a float64 reference,
// fed inputs already rounded to `dtype`: atol is relative to the reference's RMS (sums of any
// length), rtol to each element. float32: accumulation in another order (on a GPU also cuDNN's
// FFT and Winograd algorithms, which round differently); halves: outputs rounded to 11 or 8
// significant bits (the kernel tests' budgets).
inline Tolerance budget_for(DType dtype, DeviceType device) {
  switch (dtype) {
    case DType::f64: return {1e-12, 1e-10};
    case DType::f16: return kToleranceF16;
    case DType::bf16: return kToleranceBF16;
    default: return device == DeviceType::cpu ? Tolerance{2e-5, 1e-4} : Tolerance{1e-4, 1e-4};
  }
}

inline double rms(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return v.empty() ? 0.0 : std::sqrt(s / double(v.size()));
}

// got against the float64 reference under `tol` (atol scaled by the reference's RMS).
inline ::testing::AssertionResult matches_reference(const std::vector<double>& got, const std::vector<double>& ref,
                                                    Tolerance tol) {
  const double scale = std::max(rms(ref), 1e-30);
  return all_close(got, ref, {tol.atol * scale, tol.rtol});
}

// ---- between the reference's double vectors and tensors

// A tensor of `values` in `dtype` on `device` (values not representable there are rounded).
inline Tensor tensor_of(const std::vector<double>& values, const Shape& shape, DType dtype, Device device) {
  return Tensor::from_vector(values, shape).to(dtype).to(device);
}

// Its values as doubles, read back to the host.
inline std::vector<double> values_of(const Tensor& t) {
  return t.to(Device::cpu()).to(DType::f64).to_vector<double>();
}

// n standard-normal values (scaled by sd), rounded to `dtype` so that the reference sees exactly
// what the implementation reads.
inline std::vector<double> random_values(int64_t n, uint64_t seed, DType dtype, double sd = 1.0) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist(0.0, sd);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = dist(gen);
  return values_of(Tensor::from_vector(v, {n}).to(dtype));
}

// [n, c, hw] <-> [n, hw, c]: NCHW to channels-last and back, by plain index arithmetic.
inline std::vector<double> nchw_to_nhwc(const std::vector<double>& v, int64_t n, int64_t c, int64_t hw) {
  std::vector<double> out(v.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p) out[size_t((i * hw + p) * c + ch)] = v[size_t((i * c + ch) * hw + p)];
  return out;
}
inline std::vector<double> nhwc_to_nchw(const std::vector<double>& v, int64_t n, int64_t c, int64_t hw) {
  std::vector<double> out(v.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p) out[size_t((i * c + ch) * hw + p)] = v[size_t((i * hw + p) * c + ch)];
  return out;
}

}  // namespace cg::test
