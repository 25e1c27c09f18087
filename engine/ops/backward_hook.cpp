// ops::backward_hook: an identity in the forward whose backward first runs a callback, then hands
// the gradient on unchanged. dist.sharding=full_shard puts one on each unit's output, so that a
// unit's parameters are gathered again just before its backward needs them (PyTorch FSDP's
// pre-backward hook, registered the same way: on the forward's output).
#include <functional>

#include "engine/autograd/node.h"
#include "engine/ops.h"

namespace cg::ops {
namespace {

class BackwardHook : public autograd::Node {
 public:
  explicit BackwardHook(std::function<void()> before) : before_(std::move(before)) {}
  std::string name() const override { return "BackwardHook"; }
  void release_saved() override { before_ = nullptr; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    if (before_) before_();
    return {dy};
  }

 private:
  std::function<void()> before_;
};

}  // namespace

Tensor backward_hook(const Tensor& x, std::function<void()> before_backward) {
  if (!autograd::any_requires_grad({&x})) return x;
  Tensor y = x.detach();  // the same memory, a new node in the graph
  autograd::connect(y, std::make_shared<BackwardHook>(std::move(before_backward)), {&x});
  return y;
}

}  // namespace cg::ops
