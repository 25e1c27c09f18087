// The classifier head: global average pool, flatten/reshape, linear, cross-entropy.
#include "engine/autograd/node.h"
#include "engine/ops.h"
#include "engine/ops/dispatch.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/loss.h"
#include "kernels/cpu/pool.h"

namespace cg::ops {
namespace {

class GlobalAvgPoolBackward : public autograd::Node {
 public:
  explicit GlobalAvgPoolBackward(Shape x_shape) : x_shape_(std::move(x_shape)) {}
  std::string name() const override { return "GlobalAvgPoolBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    Tensor dx = Tensor::empty(x_shape_, dy.dtype());
    detail::dispatch_floating("global_avg_pool backward", dy, [&]<typename T>() {
      kernels::cpu::global_avg_pool_backward<T>(dy.numel(), x_shape_[2] * x_shape_[3],
                                                dy.data<T>(), dx.data<T>());
    });
    return {dx};
  }

 private:
  Shape x_shape_;
};

class ReshapeBackward : public autograd::Node {
 public:
  explicit ReshapeBackward(Shape x_shape) : x_shape_(std::move(x_shape)) {}
  std::string name() const override { return "ReshapeBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override { return {dy.view(x_shape_)}; }

 private:
  Shape x_shape_;
};

class LinearBackward : public autograd::Node {
 public:
  LinearBackward(Tensor x, Tensor w, bool has_bias)
      : x_(std::move(x)), w_(std::move(w)), has_bias_(has_bias) {}
  std::string name() const override { return "LinearBackward"; }
  void release_saved() override { x_ = w_ = {}; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    const int64_t m = x_.size(0), k = x_.size(1), n = w_.size(0);
    std::vector<Tensor> grads(3);
    if (needs_grad(0)) grads[0] = Tensor::empty(x_.shape(), x_.dtype());
    grads[1] = Tensor::empty(w_.shape(), w_.dtype());
    if (has_bias_) grads[2] = Tensor::empty({n}, w_.dtype());
    detail::dispatch_floating("linear backward", dy, [&]<typename T>() {
      kernels::cpu::linear_backward<T>(m, k, n, dy.data<T>(), x_.data<T>(), w_.data<T>(),
                                       needs_grad(0) ? grads[0].data<T>() : nullptr,
                                       grads[1].data<T>(), has_bias_ ? grads[2].data<T>() : nullptr);
    });
    return grads;
  }

 private:
  Tensor x_, w_;
  bool has_bias_;
};

class CrossEntropyBackward : public autograd::Node {
 public:
  CrossEntropyBackward(Tensor probs, Tensor labels)
      : probs_(std::move(probs)), labels_(std::move(labels)) {}
  std::string name() const override { return "CrossEntropyBackward"; }
  void release_saved() override { probs_ = labels_ = {}; }
  std::vector<Tensor> apply(const Tensor& dloss) override {
    Tensor dlogits = Tensor::empty(probs_.shape(), probs_.dtype());
    detail::dispatch_floating("cross_entropy backward", probs_, [&]<typename T>() {
      kernels::cpu::cross_entropy_backward<T>(probs_.size(0), probs_.size(1), T(dloss.item()),
                                              probs_.data<T>(), labels_.data<int64_t>(),
                                              dlogits.data<T>());
    });
    return {dlogits, Tensor()};
  }

 private:
  Tensor probs_, labels_;
};

}  // namespace

Tensor global_avg_pool(const Tensor& x) {
  CG_CHECK(x.dim() == 4, "global_avg_pool: input {} must be 4-D (NCHW)", x.str());
  Tensor y = Tensor::empty({x.size(0), x.size(1)}, x.dtype());
  detail::dispatch_floating("global_avg_pool", x, [&]<typename T>() {
    kernels::cpu::global_avg_pool_forward<T>(x.size(0) * x.size(1), x.size(2) * x.size(3),
                                             x.data<T>(), y.data<T>());
  });
  if (autograd::any_requires_grad({&x}))
    autograd::connect(y, std::make_shared<GlobalAvgPoolBackward>(x.shape()), {&x});
  return y;
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  Tensor y = x.view(shape);
  if (autograd::any_requires_grad({&x}))
    autograd::connect(y, std::make_shared<ReshapeBackward>(x.shape()), {&x});
  return y;
}

Tensor flatten(const Tensor& x) {
  CG_CHECK(x.dim() >= 1, "flatten: needs a batch dimension, got {}", x.str());
  return reshape(x, {x.size(0), x.numel() / std::max<int64_t>(x.size(0), 1)});
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  CG_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1),
           "linear: input {} does not match weight {}", x.str(), weight.str());
  detail::check_same("linear", x, weight);
  detail::check_same("linear", x, bias);
  const int64_t m = x.size(0), k = x.size(1), n = weight.size(0);
  if (bias.defined()) CG_CHECK(bias.numel() == n, "linear: bias {} for {} outputs", bias.str(), n);
  Tensor y = Tensor::empty({m, n}, x.dtype());
  detail::dispatch_floating("linear", x, [&]<typename T>() {
    kernels::cpu::linear_forward<T>(m, k, n, x.data<T>(), weight.data<T>(),
                                    bias.defined() ? bias.data<T>() : nullptr, y.data<T>());
  });
  if (autograd::any_requires_grad({&x, &weight, &bias})) {
    auto node = std::make_shared<LinearBackward>(x.detach(), weight.detach(), bias.defined());
    autograd::connect(y, node, {&x, &weight, &bias});
  }
  return y;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& labels, int64_t* correct) {
  CG_CHECK(logits.dim() == 2, "cross_entropy: logits {} must be [N, classes]", logits.str());
  CG_CHECK(labels.dtype() == DType::i64 && labels.dim() == 1 && labels.size(0) == logits.size(0),
           "cross_entropy: labels {} for logits {}", labels.str(), logits.str());
  const int64_t n = logits.size(0), classes = logits.size(1);
  const int64_t* lab = labels.data<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    CG_CHECK(lab[i] >= 0 && lab[i] < classes, "cross_entropy: label {} at row {} outside [0, {})",
             lab[i], i, classes);
  Tensor loss = Tensor::empty({}, logits.dtype());
  Tensor probs = Tensor::empty(logits.shape(), logits.dtype());
  detail::dispatch_floating("cross_entropy", logits, [&]<typename T>() {
    const int64_t hits = kernels::cpu::cross_entropy_forward<T>(
        n, classes, logits.data<T>(), lab, loss.data<T>(), probs.data<T>());
    if (correct) *correct = hits;
  });
  if (autograd::any_requires_grad({&logits}))
    autograd::connect(loss, std::make_shared<CrossEntropyBackward>(probs, labels.detach()),
                      {&logits, nullptr});
  return loss;
}

}  // namespace cg::ops
