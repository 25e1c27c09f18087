// The implementations the conformance suites run. For the families with a registry (convolution,
// batch norm, linear): every entry of the registry, each with the ops::KernelPolicy that the
// suite places in the problems it hands that entry (the policy that selects it, and for an entry
// that runs another implementation inside, the one it picks there). This is the only place that
// knows how an implementation is chosen; the suites call `implementations_of` and nothing else,
// so a new implementation is tested by being registered. The families that are device switches
// (pooling, elementwise, loss, optimizer updates, loss scaling) have no entries: there each device
// is the implementation (`device_implementation`), run through the public engine ops.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/registry.h"
#include "engine/kernel_policy.h"

namespace cg::test {

template <typename Interface>
struct Implementation {
  std::string name;  // the registry's name, with the CPU convolution algorithm run inside where there is one
  DeviceType device;
  std::shared_ptr<const Interface> impl;  // null for a device switch
  // Placed in every problem the suite builds for `impl`: what selects it, and what it picks inside.
  ops::KernelPolicy policy{};
};

// A switched family's implementation: the public ops on `device`'s tensors.
struct DeviceSwitch {};
inline Implementation<DeviceSwitch> device_implementation(DeviceType device) {
  return {device == DeviceType::cpu ? "cpu" : "cuda", device, nullptr};
}

namespace detail {

// The policy naming a GPU entry by its selecting value (kernels.conv, kernels.batch_norm).
inline ops::KernelPolicy gpu_policy(const std::string& family, impl::ImplKey selected_by) {
  const ops::GpuImpl choice = selected_by == impl::ImplKey::cudnn    ? ops::GpuImpl::cudnn
                              : selected_by == impl::ImplKey::native ? ops::GpuImpl::native
                                                                     : ops::GpuImpl::automatic;
  ops::KernelPolicy policy;
  if (family == "conv") policy.conv = choice;
  if (family == "batch_norm") policy.batch_norm = choice;
  return policy;
}

// The kernels.cpu_conv value of a CPU convolution entry, by its selecting value (the plain
// reference, which no value selects and which reads no policy, gets im2col's).
inline ops::CpuConvAlgorithm cpu_conv_of(impl::ImplKey selected_by) {
  if (selected_by == impl::ImplKey::winograd) return ops::CpuConvAlgorithm::winograd;
  if (selected_by == impl::ImplKey::winograd2) return ops::CpuConvAlgorithm::winograd2;
  if (selected_by == impl::ImplKey::direct) return ops::CpuConvAlgorithm::direct;
  return ops::CpuConvAlgorithm::im2col;
}

inline ops::KernelPolicy cpu_conv_policy(ops::CpuConvAlgorithm algorithm) {
  ops::KernelPolicy policy;
  policy.cpu_conv = algorithm;
  return policy;
}

}  // namespace detail

// Every entry of `registry`. CPU convolutions run under the kernels.cpu_conv value that selects
// them; the CPU channels-last one, which runs the NCHW one its policy picks inside, once per
// algorithm (so each algorithm runs every shape it supports, not only those auto gives it).
template <typename Interface>
std::vector<Implementation<Interface>> implementations_of(const impl::Registry<Interface>& registry) {
  std::vector<Implementation<Interface>> out;
  const std::string& family = registry.family();
  for (const auto& e : registry.entries()) {
    if (e.device == DeviceType::cuda) {
      out.push_back({e.name, e.device, e.impl, detail::gpu_policy(family, e.selected_by)});
    } else if (family == "conv" && e.selected_by == impl::ImplKey::channels_last) {
      for (auto [algorithm, label] : {std::pair{ops::CpuConvAlgorithm::im2col, "im2col"},
                                      {ops::CpuConvAlgorithm::winograd, "winograd"},
                                      {ops::CpuConvAlgorithm::winograd2, "winograd2"},
                                      {ops::CpuConvAlgorithm::direct, "direct"}})
        out.push_back({e.name + " " + label, e.device, e.impl, detail::cpu_conv_policy(algorithm)});
    } else if (family == "conv") {
      out.push_back({e.name, e.device, e.impl, detail::cpu_conv_policy(detail::cpu_conv_of(e.selected_by))});
    } else {
      out.push_back({e.name, e.device, e.impl});
    }
  }
  return out;
}

}  // namespace cg::test
