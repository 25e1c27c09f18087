// Module: the unit models are built from, as in torch.nn. A module owns named parameters (leaf
// tensors that require grad), named buffers (state that is saved but not trained, e.g. running
// statistics) and named child modules, all in registration order, which fixes the order and the
// dotted names of state_dict() ("layer1.0.bn1.running_mean"), the same as PyTorch's.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace cg::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor forward(const Tensor& x) = 0;
  // forward(x), between this module's forward hooks when it has them. Sequential and MiniResNet
  // call their blocks and stages through this, so a hook on one sees every call; a layer a module
  // calls by name (conv1_->forward, bn1_->forward_relu) runs unhooked.
  Tensor operator()(const Tensor& x);

  // What runs around forward (PyTorch's forward pre-hook and forward hook): `before`, then
  // forward, then `after`, which may replace the output (with ops::backward_hook of it, say).
  // dist.sharding=full_shard gathers a unit's parameters before and frees them after.
  struct ForwardHooks {
    std::function<void()> before;
    std::function<Tensor(const Tensor& y)> after;
  };
  void set_forward_hooks(ForwardHooks hooks) { hooks_ = std::move(hooks); }

  // Parameters of this module and its children, depth first in registration order.
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  NamedTensors named_buffers() const;
  // Parameters and buffers: for each module its own parameters, then its own buffers, then its
  // children's, exactly PyTorch's state_dict order. The tensors are the live ones (not copies).
  NamedTensors state_dict() const;
  // Copies values in. strict: every key must be present and no extra key allowed. Shapes must
  // match; dtypes are converted. Errors name the key.
  void load_state_dict(const std::map<std::string, Tensor>& values, bool strict = true);

  // Moves every parameter and buffer to `device` in place: the tensors keep their identity
  // (optimizers and hooks made afterwards see the moved ones), their gradients are dropped.
  void to(Device device);

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Drops every parameter's .grad (PyTorch's zero_grad(set_to_none=True)).
  void zero_grad();
  // Calls visit(dotted name, module) for this module ("") and every descendant, depth first in
  // registration order (PyTorch's named_modules()).
  void for_each_module(const std::function<void(const std::string&, Module&)>& visit,
                       const std::string& prefix = "");

 protected:
  Tensor& register_parameter(const std::string& name, Tensor t);
  Tensor& register_buffer(const std::string& name, Tensor t);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    return m;
  }

 private:
  struct Collect {  // which of each module's tensors go in
    bool parameters = false;
    bool buffers = false;
  };
  void collect(const std::string& prefix, Collect what, NamedTensors& out) const;

  NamedTensors params_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  ForwardHooks hooks_;
};

}  // namespace cg::nn
