#include "nn/optimizer.h"

#include "engine/autograd/grad_mode.h"

namespace cg::nn {
namespace {
void check_fp32_cpu(const std::string& name, const Tensor& p, const Tensor& g) {
  CG_CHECK(p.dtype() == DType::f32 && g.dtype() == DType::f32 && p.device().is_cpu(),
           "optimizer: parameter '{}' is {} with gradient {}; the CPU update needs float32", name,
           p.str(), g.str());
}
}  // namespace

void Optimizer::step(double lr) {
  autograd::NoGradGuard no_grad;
  for (auto& [name, param] : params_) {
    Tensor grad = param.grad();
    if (!grad.defined()) continue;
    check_fp32_cpu(name, param, grad);
    update(name, param, grad, lr, per_param_[name]);
  }
  ++steps_;
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
  per_param_.clear();
  for (const auto& [name, param] : params_) {
    for (const auto& state_name : state_names()) {
      auto it = state.find(state_name + "." + name);
      if (it == state.end()) continue;  // this parameter had no gradient yet when saved
      per_param_[name][state_name] = it->second.to(DType::f32).clone();
    }
  }
  steps_ = steps;
}

SGD::SGD(NamedTensors params, const kernels::cpu::SgdParams& hyper)
    : Optimizer(std::move(params)), hyper_(hyper) {
  CG_CHECK(hyper.lr >= 0 && hyper.momentum >= 0 && hyper.weight_decay >= 0,
           "SGD: negative hyper-parameter");
  CG_CHECK(!hyper.nesterov || (hyper.momentum > 0 && hyper.dampening == 0),
           "SGD: nesterov needs momentum > 0 and zero dampening");
}

std::vector<std::string> SGD::state_names() const { return {"momentum_buffer"}; }

void SGD::update(const std::string& name, Tensor& param, const Tensor& grad, double lr,
                 std::map<std::string, Tensor>& state) {
  kernels::cpu::SgdParams h = hyper_;
  h.lr = float(lr);
  float* buf = nullptr;
  bool first = false;
  if (h.momentum != 0) {
    Tensor& b = state["momentum_buffer"];
    if (!b.defined()) {
      b = Tensor::empty(param.shape());
      first = true;
    }
    buf = b.data<float>();
  }
  kernels::cpu::sgd_update(param.numel(), h, first, param.data<float>(), grad.data<float>(), buf);
}

AdamW::AdamW(NamedTensors params, const kernels::cpu::AdamWParams& hyper)
    : Optimizer(std::move(params)), hyper_(hyper) {
  CG_CHECK(hyper.beta1 >= 0 && hyper.beta1 < 1 && hyper.beta2 >= 0 && hyper.beta2 < 1,
           "AdamW: betas must lie in [0, 1)");
}

void AdamW::update(const std::string& name, Tensor& param, const Tensor& grad, double lr,
                   std::map<std::string, Tensor>& state) {
  kernels::cpu::AdamWParams h = hyper_;
  h.lr = float(lr);
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
  kernels::cpu::adamw_update(param.numel(), h, int64_t(t), param.data<float>(), grad.data<float>(),
                             m.data<float>(), v.data<float>());
}

}  // namespace cg::nn
