// relu, add, add_relu and scale, with their backward nodes, and gradient accumulation. The
// implementation comes from the elementwise registry (engine/impl/elementwise.h); relu's backward
// node keeps the one that ran the forward.
#include "engine/autograd/node.h"
#include "engine/impl/elementwise.h"
#include "engine/ops.h"
#include "engine/ops/dispatch.h"

namespace cg::ops {
namespace {

using Impl = std::shared_ptr<const impl::ElementwiseImpl>;

impl::ElementwiseProblem problem_of(const Tensor& t) { return {t.numel(), t.device(), t.dtype()}; }

// The implementation for `op` on t's device and dtype.
Impl pick(const char* op, const Tensor& t) {
  if (t.device().is_cuda()) detail::on_gpu(op, t);  // names the op on a dtype the GPU lacks
  return impl::elementwise_registry().pick(problem_of(t), impl::Choice::automatic,
                                           [&] { return fmt::format("{} of {}", op, t.str()); });
}

// relu and add_relu share a backward: the gradient passes where the output is positive, to every
// input (one for relu, two for add_relu).
class ReluBackward : public autograd::Node {
 public:
  ReluBackward(Impl impl, Tensor y, int num_inputs)
      : impl_(std::move(impl)), y_(std::move(y)), num_inputs_(num_inputs) {}
  std::string name() const override { return num_inputs_ == 1 ? "ReluBackward" : "AddReluBackward"; }
  void release_saved() override { y_ = {}; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    Tensor dx = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
    impl_->relu_backward(problem_of(dy), dy, y_, dx);
    return std::vector<Tensor>(size_t(num_inputs_), dx);
  }

 private:
  Impl impl_;  // the implementation that ran the forward
  Tensor y_;
  int num_inputs_;
};

class AddBackward : public autograd::Node {
 public:
  std::string name() const override { return "AddBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override { return {dy, dy}; }
};

class ScaleBackward : public autograd::Node {
 public:
  explicit ScaleBackward(double alpha) : alpha_(alpha) {}
  std::string name() const override { return "ScaleBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override { return {scale(dy, alpha_)}; }

 private:
  double alpha_;
};

void check_same_shape(const char* op, const Tensor& a, const Tensor& b) {
  CG_CHECK(a.shape() == b.shape(), "{}: shapes {} and {} differ", op, a.str(), b.str());
  detail::check_same(op, a, b);
}

}  // namespace

Tensor relu(const Tensor& x) {
  Impl implementation = pick("relu", x);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  implementation->relu(problem_of(x), x, y);
  if (autograd::any_requires_grad({&x}))
    autograd::connect(y, std::make_shared<ReluBackward>(std::move(implementation), y.detach(), 1), {&x});
  return y;
}

Tensor add(const Tensor& a, const Tensor& b) {
  check_same_shape("add", a, b);
  Tensor y = Tensor::empty(a.shape(), a.dtype(), a.device());
  pick("add", a)->add(problem_of(a), a, b, y);
  if (autograd::any_requires_grad({&a, &b}))
    autograd::connect(y, std::make_shared<AddBackward>(), {&a, &b});
  return y;
}

Tensor add_relu(const Tensor& a, const Tensor& b) {
  check_same_shape("add_relu", a, b);
  Impl implementation = pick("add_relu", a);
  Tensor y = Tensor::empty(a.shape(), a.dtype(), a.device());
  implementation->add_relu(problem_of(a), a, b, y);
  if (autograd::any_requires_grad({&a, &b}))
    autograd::connect(y, std::make_shared<ReluBackward>(std::move(implementation), y.detach(), 2), {&a, &b});
  return y;
}

Tensor scale(const Tensor& x, double alpha) {
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  pick("scale", x)->scale(problem_of(x), x, alpha, y);
  if (autograd::any_requires_grad({&x}))
    autograd::connect(y, std::make_shared<ScaleBackward>(alpha), {&x});
  return y;
}

void accumulate_(Tensor& dst, const Tensor& src) {
  check_same_shape("accumulate_", dst, src);
  pick("accumulate_", dst)->accumulate(problem_of(dst), src, dst);
}

}  // namespace cg::ops
