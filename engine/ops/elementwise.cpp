// relu, silu, add, add_relu and scale, with their backward nodes, and gradient accumulation: the CPU
// reference (kernels/cpu/elementwise.h, float32 and float64) or the CUDA kernels
// (kernels/cuda/elementwise.h, f32, f16 and bf16, on the current stream), by the tensor's device.
#include "engine/autograd/node.h"
#include "engine/ops.h"
#include "engine/dispatch.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cuda/elementwise.h"

namespace cg::ops {
namespace {

namespace cpu = kernels::cpu;
namespace cu = kernels::cuda;
using detail::on_device;
using detail::stream_of;

void relu_into(const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  on_device(
      "relu", x, [&]<typename T>() { cpu::relu_forward<T>(n, x.data<T>(), y.data<T>()); },
      [&] { cu::relu_forward(n, x.dtype(), x.raw_data(), y.raw_data(), stream_of(x)); });
}

void relu_backward_into(const Tensor& dy, const Tensor& y, Tensor& dx) {
  const int64_t n = dy.numel();
  on_device(
      "relu backward", dy, [&]<typename T>() { cpu::relu_backward<T>(n, dy.data<T>(), y.data<T>(), dx.data<T>()); },
      [&] { cu::relu_backward(n, dy.dtype(), dy.raw_data(), y.raw_data(), dx.raw_data(), stream_of(dy)); });
}

void add_into(const Tensor& a, const Tensor& b, Tensor& y) {
  const int64_t n = a.numel();
  on_device(
      "add", a, [&]<typename T>() { cpu::add<T>(n, a.data<T>(), b.data<T>(), y.data<T>()); },
      [&] { cu::add(n, a.dtype(), a.raw_data(), b.raw_data(), y.raw_data(), stream_of(a)); });
}

void add_relu_into(const Tensor& a, const Tensor& b, Tensor& y) {
  const int64_t n = a.numel();
  on_device(
      "add_relu", a, [&]<typename T>() { cpu::add_relu<T>(n, a.data<T>(), b.data<T>(), y.data<T>()); },
      [&] { cu::add_relu(n, a.dtype(), a.raw_data(), b.raw_data(), y.raw_data(), stream_of(a)); });
}

void scale_into(const Tensor& x, double alpha, Tensor& y) {
  const int64_t n = x.numel();
  on_device(
      "scale", x, [&]<typename T>() { cpu::scale<T>(n, T(alpha), x.data<T>(), y.data<T>()); },
      [&] { cu::scale(n, x.dtype(), float(alpha), x.raw_data(), y.raw_data(), stream_of(x)); });
}

void silu_into(const Tensor& x, Tensor& y) {
  const int64_t n = x.numel();
  on_device(
      "silu", x, [&]<typename T>() { cpu::silu_forward<T>(n, x.data<T>(), y.data<T>()); },
      [&] { cu::silu_forward(n, x.dtype(), x.raw_data(), y.raw_data(), stream_of(x)); });
}

void silu_backward_into(const Tensor& dy, const Tensor& x, Tensor& dx) {
  const int64_t n = dy.numel();
  on_device(
      "silu backward", dy, [&]<typename T>() { cpu::silu_backward<T>(n, dy.data<T>(), x.data<T>(), dx.data<T>()); },
      [&] { cu::silu_backward(n, dy.dtype(), dy.raw_data(), x.raw_data(), dx.raw_data(), stream_of(dy)); });
}

// silu's gradient needs the input (the output alone does not give sigmoid(x) back).
class SiluBackward : public autograd::Node {
 public:
  explicit SiluBackward(Tensor x) : x_(std::move(x)) {}
  std::string name() const override { return "SiluBackward"; }
  void release_saved() override { x_ = {}; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    Tensor dx = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
    silu_backward_into(dy, x_, dx);
    return {dx};
  }

 private:
  Tensor x_;
};

// relu and add_relu share a backward: the gradient passes where the output is positive, to every
// input (one for relu, two for add_relu).
class ReluBackward : public autograd::Node {
 public:
  ReluBackward(Tensor y, int num_inputs) : y_(std::move(y)), num_inputs_(num_inputs) {}
  std::string name() const override { return num_inputs_ == 1 ? "ReluBackward" : "AddReluBackward"; }
  void release_saved() override { y_ = {}; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    Tensor dx = Tensor::empty(dy.shape(), dy.dtype(), dy.device());
    relu_backward_into(dy, y_, dx);
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
  relu_into(x, y);
  if (autograd::any_requires_grad({&x})) autograd::connect(y, std::make_shared<ReluBackward>(y.detach(), 1), {&x});
  return y;
}

Tensor silu(const Tensor& x) {
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  silu_into(x, y);
  if (autograd::any_requires_grad({&x})) autograd::connect(y, std::make_shared<SiluBackward>(x.detach()), {&x});
  return y;
}

Tensor add(const Tensor& a, const Tensor& b) {
  check_same_shape("add", a, b);
  Tensor y = Tensor::empty(a.shape(), a.dtype(), a.device());
  add_into(a, b, y);
  if (autograd::any_requires_grad({&a, &b}))
    autograd::connect(y, std::make_shared<AddBackward>(), {&a, &b});
  return y;
}

Tensor add_relu(const Tensor& a, const Tensor& b) {
  check_same_shape("add_relu", a, b);
  Tensor y = Tensor::empty(a.shape(), a.dtype(), a.device());
  add_relu_into(a, b, y);
  if (autograd::any_requires_grad({&a, &b}))
    autograd::connect(y, std::make_shared<ReluBackward>(y.detach(), 2), {&a, &b});
  return y;
}

Tensor scale(const Tensor& x, double alpha) {
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  scale_into(x, alpha, y);
  if (autograd::any_requires_grad({&x}))
    autograd::connect(y, std::make_shared<ScaleBackward>(alpha), {&x});
  return y;
}

void accumulate_(Tensor& dst, const Tensor& src) {
  check_same_shape("accumulate_", dst, src);
  const int64_t n = dst.numel();
  on_device(
      "accumulate_", dst, [&]<typename T>() { cpu::accumulate<T>(n, src.data<T>(), dst.data<T>()); },
      [&] { cu::accumulate(n, dst.dtype(), src.raw_data(), dst.raw_data(), stream_of(dst)); });
}

}  // namespace cg::ops
