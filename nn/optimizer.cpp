#include "nn/optimizer.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "engine/autograd/grad_mode.h"

namespace cg::nn {
namespace {

void check_fp32(const std::string& name, const Tensor& p, const Tensor& g, Device device) {
  CG_CHECK(p.dtype() == DType::f32 && g.dtype() == DType::f32 && p.device() == device && g.device() == device,
           "optimizer: parameter '{}' is {} with gradient {}; the update needs float32 on {}", name, p.str(),
           g.str(), device.str());
}

// A loaded state tensor must be what the update will use it as: update() writes numel(param)
// elements into a buffer and reads a counter through element 0, so a wrong shape would be an
// out-of-bounds access, and a counter of inf or -1 a nonsense bias correction.
void check_loaded_state(const std::string& key, const Tensor& t, const Tensor& param, bool counter) {
  CG_CHECK(t.dtype() == DType::f32, "optimizer state '{}' is {}; it must be float32", key, t.str());
  if (!counter) {
    CG_CHECK(t.shape() == param.shape(), "optimizer state '{}' has shape {}, but its parameter has {}", key,
             shape_str(t.shape()), shape_str(param.shape()));
    return;
  }
  CG_CHECK(t.shape().empty(), "optimizer state '{}' has shape {}; a step counter is a scalar []", key,
           shape_str(t.shape()));
  const double v = t.item();
  constexpr double kMaxExactStep = double(1 << 24);  // float32 counts every step up to here
  CG_CHECK(v >= 0 && v <= kMaxExactStep && std::floor(v) == v,
           "optimizer state '{}' = {} is not a step count (a whole number in [0, 2^24])", key, v);
}

// The hyperparameters with this step's scheduled learning rate.
template <typename Hyper>
Hyper hyper_at(Hyper h, double lr) {
  h.lr = float(lr);
  return h;
}

}  // namespace

void Optimizer::step(double lr, const Tensor& found_inf) {
  autograd::NoGradGuard no_grad;
  std::vector<Entry> entries;
  if (sharded_) {
    for (Slice& s : slices_) entries.push_back({&s.name, &s.param, s.grad, &per_param_[s.name]});
  } else {
    for (auto& [name, param] : params_) {
      Tensor grad = param.grad();
      if (grad.defined()) entries.push_back({&name, &param, grad, &per_param_[name]});
    }
  }
  if (!entries.empty()) {
    const Device device = entries.front().param->device();
    for (const Entry& e : entries) check_fp32(*e.name, *e.param, e.grad, device);
    if (device.is_cuda()) {
      CG_CHECK(!found_inf.defined() || (found_inf.device() == device && found_inf.dtype() == DType::f32),
               "optimizer: found_inf {} must be float32 on {}", found_inf.str(), device.str());
      update_gpu(entries, lr, found_inf);
    } else {
      CG_CHECK(!found_inf.defined(), "optimizer: found_inf is for GPU steps; on the CPU skip step() instead");
      for (Entry& e : entries) update(*e.name, *e.param, e.grad, lr, *e.state);
    }
  }
  ++steps_;
}

void Optimizer::set_device_lr(double lr) {
  CG_CHECK(!params_.empty() && params_.front().second.device().is_cuda(),
           "optimizer: a learning rate in device memory is for GPU parameters (CUDA graphs)");
  if (!device_lr_.defined()) device_lr_ = Tensor::empty({}, DType::f32, params_.front().second.device());
  device_lr_.fill_(lr);  // a one-element fill on the current stream, ordered before the next step
}

void Optimizer::zero_grad() {
  for (auto& [name, param] : params_) param.impl().grad.reset();
}

NamedTensors Optimizer::state_tensors() const {
  NamedTensors out;
  for (const auto& [name, param] : params_) {
    auto it = per_param_.find(name);
    if (it == per_param_.end()) continue;
    for (const auto& state_name : state_names()) {
      auto s = it->second.find(state_name);
      if (s != it->second.end()) out.emplace_back(state_name + "." + name, s->second);
    }
  }
  return out;
}

void Optimizer::load_state_tensors(const std::map<std::string, Tensor>& state, int64_t steps) {
  CG_CHECK(steps >= 0, "optimizer state: {} steps taken is negative", steps);
  std::map<std::string, const Tensor*> param_of;
  for (const auto& [name, param] : params_) param_of[name] = &param;
  const std::vector<std::string> kinds = state_names();
  // Everything is checked before anything is kept: a bad tensor leaves the old state intact.
  for (const auto& [key, t] : state) {
    const size_t dot = key.find('.');  // state names have no dot; parameter names may
    const std::string kind = key.substr(0, dot);
    auto param = dot == std::string::npos ? param_of.end() : param_of.find(key.substr(dot + 1));
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end() || param == param_of.end())
      throw Error(fmt::format("optimizer state '{}' is not one of {}'s: it names no state kind ({}) of a "
                              "parameter of this model", key, name(), fmt::join(kinds, ", ")));
    check_loaded_state(key, t, *param->second, is_counter(kind));
  }
  per_param_.clear();
  for (const auto& [name, param] : params_) {
    for (const auto& state_name : kinds) {
      auto it = state.find(state_name + "." + name);
      if (it == state.end()) continue;  // this parameter had no gradient yet when saved
      // The step counter stays on the host (CPU); the moment buffers live with their parameter.
      const Device where = is_counter(state_name) ? Device::cpu() : param.device();
      per_param_[name][state_name] = it->second.to(where).clone();
    }
  }
  steps_ = steps;
  if (sharded_) cut_state_to_shard();
}

void Optimizer::shard(std::vector<Slice> slices) {
  std::map<std::string, Range> ranges;
  for (const Slice& s : slices) {
    auto it = std::find_if(params_.begin(), params_.end(), [&](const auto& p) { return p.first == s.name; });
    CG_CHECK(it != params_.end(), "optimizer: a shard names '{}', which is not one of its parameters", s.name);
    const Range r = s.range;
    CG_CHECK(r.begin >= 0 && r.count > 0 && r.begin + r.count <= it->second.numel(),
             "optimizer: shard [{}, {}) of '{}' ({}) is out of range", r.begin, r.begin + r.count, s.name,
             it->second.str());
    CG_CHECK(s.param.shape() == Shape{r.count} && s.grad.shape() == Shape{r.count},
             "optimizer: shard [{}, {}) of '{}' comes as {} with gradient {}; two 1-D views of {} elements expected",
             r.begin, r.begin + r.count, s.name, s.param.str(), s.grad.str(), r.count);
    CG_CHECK(ranges.emplace(s.name, r).second, "optimizer: two shards of '{}'", s.name);
  }
  ranges_ = std::move(ranges);
  slices_ = std::move(slices);
  sharded_ = true;
  cut_state_to_shard();
}

NamedTensors Optimizer::gradients() const {
  NamedTensors out;
  if (sharded_) {
    for (const Slice& s : slices_) out.emplace_back(s.name, s.grad);
    return out;
  }
  for (const auto& [name, param] : params_)
    if (param.grad().defined()) out.emplace_back(name, param.grad());
  return out;
}

void Optimizer::cut_state_to_shard() {
  autograd::NoGradGuard no_grad;
  for (auto it = per_param_.begin(); it != per_param_.end();) {
    auto owned = ranges_.find(it->first);
    if (owned == ranges_.end()) {
      it = per_param_.erase(it);
      continue;
    }
    const Range r = owned->second;
    const Tensor* param = nullptr;
    for (const auto& [name, p] : params_)
      if (name == it->first) param = &p;
    for (auto& [state_name, t] : it->second)  // whole-parameter tensors only: scalars (steps) stay
      if (param && t.defined() && t.shape() == param->shape() && t.shape() != Shape{r.count})
        t = t.view_at(r.begin, {r.count}).clone();
    ++it;
  }
}

int64_t Optimizer::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& [name, state] : per_param_)
    for (const auto& [state_name, t] : state)
      if (t.defined()) bytes += int64_t(t.nbytes());
  return bytes;
}

// ---- SGD

SGD::SGD(NamedTensors params, const SgdOptions& hyper)
    : Optimizer(std::move(params)), hyper_(hyper) {
  CG_CHECK(hyper.lr >= 0 && hyper.momentum >= 0 && hyper.weight_decay >= 0,
           "SGD: negative hyper-parameter");
  CG_CHECK(!hyper.nesterov || (hyper.momentum > 0 && hyper.dampening == 0),
           "SGD: nesterov needs momentum > 0 and zero dampening");
}

std::vector<std::string> SGD::state_names() const { return {"momentum_buffer"}; }

void SGD::update(const std::string& name, Tensor& param, const Tensor& grad, double lr,
                 std::map<std::string, Tensor>& state) {
  const SgdOptions h = hyper_at(hyper_, lr);
  Tensor buf;
  bool first = false;
  if (h.momentum != 0) {
    Tensor& b = state["momentum_buffer"];
    if (!b.defined()) {
      b = Tensor::empty(param.shape());
      first = true;
    }
    buf = b;
  }
  ops::sgd_update(param, grad, buf, h, first);
}

void SGD::update_gpu(std::vector<Entry>& entries, double lr, const Tensor& found_inf) {
  const SgdOptions h = hyper_at(hyper_, lr);
  // New momentum buffers start at zero and take b = g on their first update; zero rather than
  // uninitialized so that a first step skipped on the device (found_inf) leaves them valid: the
  // next update's momentum * 0 + g is the same b = g (dampening aside, which nesterov forbids).
  std::vector<ops::UpdateSlot> first, later;
  for (Entry& e : entries) {
    Tensor buf;
    bool is_first = false;
    if (h.momentum != 0) {
      Tensor& b = (*e.state)["momentum_buffer"];
      if (!b.defined()) {
        b = Tensor::zeros(e.param->shape(), DType::f32, e.param->device());
        is_first = true;
      }
      buf = b;
    }
    (is_first ? first : later).push_back({*e.param, e.grad, buf, Tensor()});
  }
  ops::sgd_update_multi(first, h, /*first_step=*/true, found_inf, device_lr_);
  ops::sgd_update_multi(later, h, /*first_step=*/false, found_inf, device_lr_);
}

// ---- AdamW

AdamW::AdamW(NamedTensors params, const AdamWOptions& hyper)
    : Optimizer(std::move(params)), hyper_(hyper) {
  CG_CHECK(hyper.beta1 >= 0 && hyper.beta1 < 1 && hyper.beta2 >= 0 && hyper.beta2 < 1,
           "AdamW: betas must lie in [0, 1)");
}

void AdamW::update(const std::string& name, Tensor& param, const Tensor& grad, double lr,
                   std::map<std::string, Tensor>& state) {
  const AdamWOptions h = hyper_at(hyper_, lr);
  Tensor& m = state["exp_avg"];
  Tensor& v = state["exp_avg_sq"];
  Tensor& step = state["step"];  // per parameter, as in PyTorch (a parameter may skip steps)
  if (!m.defined()) {
    m = Tensor::zeros(param.shape());
    v = Tensor::zeros(param.shape());
    step = Tensor::zeros({}, DType::f32);
  }
  float& t = step.data<float>()[0];
  t += 1;
  ops::adamw_update(param, grad, m, v, int64_t(t), h);
}

void AdamW::update_gpu(std::vector<Entry>& entries, double lr, const Tensor& found_inf) {
  const AdamWOptions h = hyper_at(hyper_, lr);
  const Device device = entries.front().param->device();
  if (!device_step_.defined()) device_step_ = Tensor::zeros({}, DType::i64, device);
  std::vector<ops::UpdateSlot> slots;
  for (Entry& e : entries) {
    Tensor& m = (*e.state)["exp_avg"];
    Tensor& v = (*e.state)["exp_avg_sq"];
    if (!m.defined()) {
      m = Tensor::zeros(e.param->shape(), DType::f32, device);
      v = Tensor::zeros(e.param->shape(), DType::f32, device);
    }
    slots.push_back({*e.param, e.grad, m, v});
  }
  ops::advance_step(device_step_, found_inf);
  ops::adamw_update_multi(slots, h, device_step_, found_inf, device_lr_);
}

NamedTensors AdamW::state_tensors() const {
  NamedTensors out = Optimizer::state_tensors();
  if (!device_step_.defined()) return out;
  const Tensor step = device_step_.to(DType::f32).to(Device::cpu());  // waits for the device
  for (auto& [key, t] : out)
    if (key.starts_with("step.")) t = step;
  for (const auto& [name, state] : per_param_)  // GPU runs keep no per-parameter step tensor
    if (state.count("exp_avg") && !state.count("step")) out.emplace_back("step." + name, step);
  return out;
}

void AdamW::load_state_tensors(const std::map<std::string, Tensor>& state, int64_t steps) {
  Optimizer::load_state_tensors(state, steps);
  device_step_ = Tensor();
  if (params_.empty() || !params_.front().second.device().is_cuda()) return;
  // On the GPU one counter serves every parameter: take the largest saved step.
  int64_t step = 0;
  for (auto& [name, s] : per_param_) {
    auto it = s.find("step");
    if (it != s.end()) step = std::max(step, int64_t(it->second.item()));
    s.erase("step");
  }
  device_step_ = Tensor::full({}, double(step), DType::i64, params_.front().second.device());
}

}  // namespace cg::nn
