// Optimizers with torch.optim's semantics: SGD (momentum, dampening, nesterov, weight decay
// added to the gradient) and AdamW (decoupled weight decay, bias-corrected moments). The learning
// rate is passed to every step() by the caller's schedule, so the optimizer holds no schedule.
// Parameters whose .grad is undefined are skipped, like PyTorch's `p.grad is None`.
#pragma once
#include <map>
#include <string>

#include "kernels/cpu/optim.h"
#include "nn/module.h"

namespace cg::nn {

class Optimizer {
 public:
  explicit Optimizer(NamedTensors params) : params_(std::move(params)) {}
  virtual ~Optimizer() = default;

  void step(double lr);
  void zero_grad();  // set_to_none: frees the gradients
  int64_t steps_taken() const { return steps_; }

  // Everything a resumed run needs, as named tensors ("<state>.<param name>") plus the count of
  // steps taken; loading checks names and shapes and fails naming the missing or wrong one.
  NamedTensors state_tensors() const;
  void load_state_tensors(const std::map<std::string, Tensor>& state, int64_t steps_taken);

 protected:
  // Updates one parameter from its gradient; `state` holds the per-parameter buffers (created
  // here on first use, as PyTorch does lazily).
  virtual void update(const std::string& name, Tensor& param, const Tensor& grad, double lr,
                      std::map<std::string, Tensor>& state) = 0;
  // Names of the per-parameter state buffers this optimizer keeps ("momentum_buffer").
  virtual std::vector<std::string> state_names() const = 0;

  NamedTensors params_;
  // per_param_[param name][state name]
  std::map<std::string, std::map<std::string, Tensor>> per_param_;
  int64_t steps_ = 0;
};

class SGD : public Optimizer {
 public:
  SGD(NamedTensors params, const kernels::cpu::SgdParams& hyper);

 protected:
  void update(const std::string& name, Tensor& param, const Tensor& grad, double lr,
              std::map<std::string, Tensor>& state) override;
  std::vector<std::string> state_names() const override;

 private:
  kernels::cpu::SgdParams hyper_;
};

class AdamW : public Optimizer {
 public:
  AdamW(NamedTensors params, const kernels::cpu::AdamWParams& hyper);

 protected:
  void update(const std::string& name, Tensor& param, const Tensor& grad, double lr,
              std::map<std::string, Tensor>& state) override;
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq", "step"}; }

 private:
  kernels::cpu::AdamWParams hyper_;
};

}  // namespace cg::nn
