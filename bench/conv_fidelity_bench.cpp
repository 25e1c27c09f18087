// How exact each CPU convolution algorithm is, beside PyTorch float32: for every convolution layer
// shape of both Fashion-MNIST MiniResNets and each phase (forward y, backward-data dx,
// backward-filter dw), the relative error ||got - ref||_2 / ||ref||_2 against float64 of im2col,
// the direct convolution and Winograd F(4x4) and F(2x2) (where each runs the shape), and of PyTorch float32 in two
// summation orders (NCHW, channels-last). The inputs and the float64 reference come from
// bench/pytorch/conv_fidelity.py (bench/conv_fidelity.sh runs both), so every column saw the same
// numbers. Last column: the algorithm kernels.cpu_conv=auto runs for that phase, and its error as a
// multiple of PyTorch's larger one. Usage: conv_fidelity_bench FILE.safetensors
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/conv/conv.h"
#include "kernels/cpu_conv/auto_rule.h"
#include "kernels/cpu_conv/im2col.h"
#include "kernels/cpu_conv/conv_direct.h"
#include "kernels/cpu_conv/winograd.h"
#include "util/check.h"
#include "util/safetensors.h"

namespace {

namespace k = cg::kernels::cpu;
using cg::kernels::Conv2dShape;
using cg::ops::CpuConvAlgorithm;

struct Inputs {
  std::vector<float> x, w, dy;
  std::vector<double> ref[3];  // y, dx, dw in float64
};

template <class T>
std::vector<T> read(const cg::safetensors::File& f, const std::string& name, const char* dtype) {
  const auto* r = f.find(name);
  if (!r || r->dtype != dtype) throw cg::Error("conv_fidelity: the file lacks " + name + " as " + dtype);
  std::vector<T> v(r->bytes.size() / sizeof(T));
  std::memcpy(v.data(), r->bytes.data(), r->bytes.size());
  return v;
}

const std::string& meta(const cg::safetensors::File& f, const std::string& key) {
  auto it = f.metadata.find(key);
  if (it == f.metadata.end()) throw cg::Error("conv_fidelity: the file lacks metadata " + key);
  return it->second;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, sep);) out.push_back(item);
  return out;
}

double relative_error(const std::vector<float>& got, const std::vector<double>& ref) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(diff / norm);
}

// The three phases of one algorithm: forward, backward-data, backward-filter (no bias).
struct Algorithm {
  const char* name;
  std::function<bool(const Conv2dShape&)> runs;
  std::function<void(const Conv2dShape&, const float*, const float*, const float*, float*)> forward;
  std::function<void(const Conv2dShape&, const float*, const float*, float*)> data;
  std::function<void(const Conv2dShape&, const float*, const float*, float*, float*)> filter;
};

const std::vector<Algorithm>& algorithms() {
  static const std::vector<Algorithm> all = {
      {"im2col", [](const Conv2dShape&) { return true; }, k::im2col_conv2d_forward<float>,
       k::im2col_conv2d_backward_data<float>, k::im2col_conv2d_backward_filter<float>},
      {"direct", k::direct_conv_supports, k::direct_conv2d_forward, k::direct_conv2d_backward_data,
       k::direct_conv2d_backward_filter},
      {"winograd", k::winograd_supports, k::winograd_conv2d_forward, k::winograd_conv2d_backward_data,
       k::winograd_conv2d_backward_filter},
      {"winograd2", k::winograd_supports, k::winograd2_conv2d_forward, k::winograd2_conv2d_backward_data,
       k::winograd2_conv2d_backward_filter},
  };
  return all;
}

// Errors of one algorithm on one layer: y, dx, dw.
std::vector<double> errors(const Algorithm& a, const Conv2dShape& s, const Inputs& in) {
  std::vector<float> y(in.ref[0].size()), dx(in.ref[1].size()), dw(in.ref[2].size());
  a.forward(s, in.x.data(), in.w.data(), nullptr, y.data());
  a.data(s, in.dy.data(), in.w.data(), dx.data());
  a.filter(s, in.x.data(), in.dy.data(), dw.data(), nullptr);
  return {relative_error(y, in.ref[0]), relative_error(dx, in.ref[1]), relative_error(dw, in.ref[2])};
}

// The algorithm kernels.cpu_conv=auto runs for phase p (0 y, 1 dx, 2 dw) of this shape.
std::string auto_choice(const Conv2dShape& s, int p) {
  if (cg::impl::cpu_conv_auto(s, cg::DType::f32) == CpuConvAlgorithm::im2col) return "im2col";
  const k::ExactPhases by = k::exact_phases_auto(s);
  switch (p == 0 ? by.forward : p == 1 ? by.data : by.filter) {
    case k::ExactConv::direct: return "direct";
    case k::ExactConv::winograd2: return "winograd2";
    case k::ExactConv::im2col: break;
  }
  return "im2col";
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 2) throw cg::Error("usage: conv_fidelity_bench FILE.safetensors (bench/conv_fidelity.sh makes it)");
  const cg::safetensors::File f = cg::safetensors::load(argv[1]);
  const char* phase_names[] = {"y", "dx", "dw"};
  fmt::print("Relative L2 error against float64, batch {} (PyTorch {}). ratio: auto's error / PyTorch's larger.\n\n",
             meta(f, "batch"), meta(f, "torch"));
  fmt::print("| layer | phase | im2col | direct | winograd | winograd2 | PyTorch NCHW | PyTorch channels-last | auto runs "
             "| ratio |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string& layer : split(meta(f, "layers"), ';')) {
    const std::vector<std::string> d = split(meta(f, layer + ".shape"), ',');
    const auto v = [&](int i) { return std::stoll(d.at(size_t(i))); };
    const Conv2dShape s{std::stoll(meta(f, "batch")), v(0), v(1), v(1), v(2), v(3), v(3), v(4), v(5)};
    Inputs in{read<float>(f, layer + ".x", "F32"), read<float>(f, layer + ".w", "F32"), read<float>(f, layer + ".dy", "F32"),
              {read<double>(f, layer + ".y64", "F64"), read<double>(f, layer + ".dx64", "F64"),
               read<double>(f, layer + ".dw64", "F64")}};
    std::vector<std::vector<double>> err;  // per algorithm, per phase; empty where it does not run
    for (const Algorithm& a : algorithms()) err.push_back(a.runs(s) ? errors(a, s, in) : std::vector<double>{});
    for (int p = 0; p < 3; ++p) {
      const double nchw = std::stod(meta(f, layer + "." + phase_names[p] + ".torch_nchw"));
      const double cl = std::stod(meta(f, layer + "." + phase_names[p] + ".torch_channels_last"));
      std::string cells, chosen = auto_choice(s, p);
      double chosen_error = 0;
      for (size_t a = 0; a < err.size(); ++a) {
        cells += err[a].empty() ? " | -" : fmt::format(" | {:.2e}", err[a][size_t(p)]);
        if (chosen == algorithms()[a].name) chosen_error = err[a][size_t(p)];
      }
      fmt::print("| {} | {}{} | {:.2e} | {:.2e} | {} | {:.2f} |\n", layer, phase_names[p], cells, nchw, cl, chosen,
                 chosen_error / std::max(nchw, cl));
    }
  }
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "conv_fidelity_bench: {}\n", e.what());
  return 1;
}
