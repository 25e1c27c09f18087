// The implementations the conformance suites run: every entry of a family's registry, each with
// what makes it the one that runs. This is the only place that knows how an implementation is
// chosen (kernels.* values, kernels.cpu_conv); the suites call `implementations_of` and nothing
// else, so a new implementation is tested by being registered.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/impl/registry.h"
#include "engine/ops.h"

namespace cg::test {

template <typename Interface>
struct Implementation {
  std::string name;  // the registry's name, with the CPU convolution algorithm where there is one
  DeviceType device;
  std::shared_ptr<const Interface> impl;
  // Makes the process-wide choices under which `impl` runs every problem it supports (and, for an
  // implementation that runs another inside, the one it picks); Selected undoes them.
  std::function<void()> select = [] {};
};

// The process-wide choices back at their defaults.
inline void reset_choices() {
  ops::set_cpu_conv(ops::CpuConv::automatic);
  ops::set_gpu_kernels({});
}

// Holds an implementation's choices for a scope.
class Selected {
 public:
  template <typename Interface>
  explicit Selected(const Implementation<Interface>& implementation) {
    implementation.select();
  }
  ~Selected() { reset_choices(); }
  Selected(const Selected&) = delete;
  Selected& operator=(const Selected&) = delete;
};

namespace detail {

// A GPU entry is chosen by its kernels.* value, for the families that have a key.
inline std::function<void()> gpu_choice(const std::string& family, impl::Choice choice) {
  if (family == "conv") return [choice] { ops::set_gpu_kernels({.conv = choice}); };
  if (family == "batch_norm") return [choice] { ops::set_gpu_kernels({.batch_norm = choice}); };
  return [] {};
}

// The CPU convolution algorithm an entry runs under kernels.cpu_conv (by name, so that each
// algorithm runs every shape it supports rather than only those automatic gives it).
inline ops::CpuConv cpu_conv_of(const std::string& name) {
  if (name == "cpu winograd") return ops::CpuConv::winograd;
  if (name == "cpu direct") return ops::CpuConv::direct;
  return ops::CpuConv::im2col;
}

}  // namespace detail

// Every entry of `registry`. CPU convolutions run under the kernels.cpu_conv value that names
// them; the CPU channels-last one, which runs an NCHW one inside, once per algorithm.
template <typename Interface>
std::vector<Implementation<Interface>> implementations_of(const impl::Registry<Interface>& registry) {
  std::vector<Implementation<Interface>> out;
  const std::string& family = registry.family();
  for (const auto& e : registry.entries()) {
    if (e.device == DeviceType::cuda) {
      out.push_back({e.name, e.device, e.impl, detail::gpu_choice(family, e.selected_by)});
    } else if (family == "conv" && e.name == "cpu channels-last") {
      for (auto [algorithm, label] : {std::pair{ops::CpuConv::im2col, "im2col"},
                                      {ops::CpuConv::winograd, "winograd"}, {ops::CpuConv::direct, "direct"}})
        out.push_back({e.name + " " + label, e.device, e.impl, [algorithm] { ops::set_cpu_conv(algorithm); }});
    } else if (family == "conv") {
      const ops::CpuConv algorithm = detail::cpu_conv_of(e.name);
      out.push_back({e.name, e.device, e.impl, [algorithm] { ops::set_cpu_conv(algorithm); }});
    } else {
      out.push_back({e.name, e.device, e.impl});
    }
  }
  return out;
}

}  // namespace cg::test
