#include "nn/module.h"

#include <set>

#include "engine/autograd/grad_mode.h"

namespace cg::nn {

Tensor& Module::register_parameter(const std::string& name, Tensor t) {
  t.set_requires_grad(true);
  params_.emplace_back(name, std::move(t));
  return params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  buffers_.emplace_back(name, std::move(t));
  return buffers_.back().second;
}

void Module::collect(const std::string& prefix, Collect what, NamedTensors& out) const {
  if (what.parameters)
    for (const auto& [name, t] : params_) out.emplace_back(prefix + name, t);
  if (what.buffers)
    for (const auto& [name, t] : buffers_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", what, out);
}

Tensor Module::operator()(const Tensor& x) {
  if (hooks_.before) hooks_.before();
  Tensor y = forward(x);
  return hooks_.after ? hooks_.after(y) : y;
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect("", {.parameters = true}, out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

NamedTensors Module::named_buffers() const {
  NamedTensors out;
  collect("", {.buffers = true}, out);
  return out;
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  collect("", {.parameters = true, .buffers = true}, out);
  return out;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& values, bool strict) {
  autograd::NoGradGuard no_grad;
  std::set<std::string> used;
  for (auto& [name, t] : state_dict()) {
    auto it = values.find(name);
    if (it == values.end()) {
      if (strict) throw Error(fmt::format("state dict is missing key '{}'", name));
      continue;
    }
    if (it->second.shape() != t.shape())
      throw Error(fmt::format("state dict key '{}': shape {} does not match the model's {}", name,
                              shape_str(it->second.shape()), shape_str(t.shape())));
    Tensor dst = t;
    dst.copy_(it->second);
    used.insert(name);
  }
  if (strict)
    for (auto& [name, t] : values)
      if (!used.count(name)) throw Error(fmt::format("state dict has unexpected key '{}'", name));
}

void Module::to(Device device) {
  for (auto& [name, t] : state_dict()) {
    if (t.device() == device) continue;
    const Tensor moved = t.to(device);
    t.impl().storage = moved.impl().storage;
    t.impl().offset = moved.impl().offset;
    t.impl().grad.reset();
  }
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::zero_grad() {
  for (auto& [name, t] : named_parameters()) t.impl().grad.reset();
}

void Module::for_each_module(const std::function<void(const std::string&, Module&)>& visit,
                             const std::string& prefix) {
  visit(prefix, *this);
  for (auto& [name, child] : children_) child->for_each_module(visit, prefix.empty() ? name : prefix + "." + name);
}

}  // namespace cg::nn
