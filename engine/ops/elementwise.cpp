// relu, add, add_relu and scale, with their backward nodes.
#include "engine/autograd/node.h"
#include "engine/ops.h"
#include "engine/ops/dispatch.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cuda/elementwise.h"

namespace cg::ops {
namespace {

// relu and add_relu share a backward: the gradient passes where the output is positive, to every
// input (one for relu, two for add_relu).
class ReluBackward : public autograd::Node {
 public:
  ReluBackward(Tensor y, int num_inputs) : y_(std::move(y)), num_inputs_(num_inputs) {}
  std::string name() const override { return num_inputs_ == 1 ? "ReluBackward" : "AddReluBackward"; }
  void release_saved() override { y_ = {}; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    Tensor dx = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
    if (detail::on_gpu("relu backward", dy)) {
      kernels::cuda::relu_backward(dy.numel(), dy.dtype(), dy.raw_data(), y_.raw_data(), dx.raw_data(),
                                   detail::stream_of(dy));
    } else {
      detail::dispatch_floating("relu backward", dy, [&]<typename T>() {
        kernels::cpu::relu_backward<T>(dy.numel(), dy.data<T>(), y_.data<T>(), dx.data<T>());
      });
    }
    return std::vector<Tensor>(size_t(num_inputs_), dx);
  }

 private:
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
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (detail::on_gpu("relu", x)) {
    kernels::cuda::relu_forward(x.numel(), x.dtype(), x.raw_data(), y.raw_data(), detail::stream_of(x));
  } else {
    detail::dispatch_floating("relu", x, [&]<typename T>() {
      kernels::cpu::relu_forward<T>(x.numel(), x.data<T>(), y.data<T>());
    });
  }
  if (autograd::any_requires_grad({&x}))
    autograd::connect(y, std::make_shared<ReluBackward>(y.detach(), 1), {&x});
  return y;
}

Tensor add(const Tensor& a, const Tensor& b) {
  check_same_shape("add", a, b);
  Tensor y = Tensor::empty(a.shape(), a.dtype(), a.device());
  if (detail::on_gpu("add", a)) {
    kernels::cuda::add(a.numel(), a.dtype(), a.raw_data(), b.raw_data(), y.raw_data(), detail::stream_of(a));
  } else {
    detail::dispatch_floating("add", a, [&]<typename T>() {
      kernels::cpu::add<T>(a.numel(), a.data<T>(), b.data<T>(), y.data<T>());
    });
  }
  if (autograd::any_requires_grad({&a, &b}))
    autograd::connect(y, std::make_shared<AddBackward>(), {&a, &b});
  return y;
}

Tensor add_relu(const Tensor& a, const Tensor& b) {
  check_same_shape("add_relu", a, b);
  Tensor y = Tensor::empty(a.shape(), a.dtype(), a.device());
  if (detail::on_gpu("add_relu", a)) {
    kernels::cuda::add_relu(a.numel(), a.dtype(), a.raw_data(), b.raw_data(), y.raw_data(), detail::stream_of(a));
  } else {
    detail::dispatch_floating("add_relu", a, [&]<typename T>() {
      kernels::cpu::add_relu<T>(a.numel(), a.data<T>(), b.data<T>(), y.data<T>());
    });
  }
  if (autograd::any_requires_grad({&a, &b}))
    autograd::connect(y, std::make_shared<ReluBackward>(y.detach(), 2), {&a, &b});
  return y;
}

Tensor scale(const Tensor& x, double alpha) {
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (detail::on_gpu("scale", x)) {
    kernels::cuda::scale(x.numel(), x.dtype(), float(alpha), x.raw_data(), y.raw_data(), detail::stream_of(x));
  } else {
    detail::dispatch_floating("scale", x, [&]<typename T>() {
      kernels::cpu::scale<T>(x.numel(), T(alpha), x.data<T>(), y.data<T>());
    });
  }
  if (autograd::any_requires_grad({&x}))
    autograd::connect(y, std::make_shared<ScaleBackward>(alpha), {&x});
  return y;
}

void accumulate_(Tensor& dst, const Tensor& src) {
  check_same_shape("accumulate_", dst, src);
  if (detail::on_gpu("accumulate_", dst)) {
    kernels::cuda::accumulate(dst.numel(), dst.dtype(), src.raw_data(), dst.raw_data(), detail::stream_of(dst));
    return;
  }
  detail::dispatch_floating("accumulate_", dst, [&]<typename T>() {
    kernels::cpu::accumulate<T>(dst.numel(), src.data<T>(), dst.data<T>());
  });
}

}  // namespace cg::ops
