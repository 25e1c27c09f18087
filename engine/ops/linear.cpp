// linear (fully connected): Eigen on the CPU, cuBLAS on the GPU in the autocast dtype.
#include "engine/autocast.h"
#include "engine/autograd/node.h"
#include "engine/ops.h"
#include "engine/ops/dispatch.h"
#include "kernels/cpu/linear.h"
#include "kernels/cuda/linear.h"

namespace cg::ops {
namespace {

class LinearBackward : public autograd::Node {
 public:
  LinearBackward(Tensor x, Tensor w, bool has_bias)
      : x_(std::move(x)), w_(std::move(w)), has_bias_(has_bias) {}
  std::string name() const override { return "LinearBackward"; }
  void release_saved() override { x_ = w_ = {}; }
  std::vector<Tensor> apply(const Tensor& dy) override {
    const int64_t m = x_.size(0), k = x_.size(1), n = w_.size(0);
    std::vector<Tensor> grads(3);
    if (needs_grad(0)) grads[0] = Tensor::empty(x_.shape(), x_.dtype(), x_.device());
    grads[1] = Tensor::empty(w_.shape(), w_.dtype(), w_.device());
    if (has_bias_) grads[2] = Tensor::empty({n}, w_.dtype(), w_.device());
    void* dx = grads[0].defined() ? grads[0].raw_data() : nullptr;
    void* db = has_bias_ ? grads[2].raw_data() : nullptr;
    if (detail::on_gpu("linear backward", dy)) {
      kernels::cuda::linear_backward(m, k, n, dy.dtype(), dy.raw_data(), x_.raw_data(), w_.raw_data(), dx,
                                     grads[1].raw_data(), db, detail::stream_of(dy));
      return grads;
    }
    detail::dispatch_floating("linear backward", dy, [&]<typename T>() {
      kernels::cpu::linear_backward<T>(m, k, n, dy.data<T>(), x_.data<T>(), w_.data<T>(), static_cast<T*>(dx),
                                       grads[1].data<T>(), static_cast<T*>(db));
    });
    return grads;
  }

 private:
  Tensor x_, w_;
  bool has_bias_;
};

}  // namespace

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  CG_CHECK(x_in.dim() == 2 && weight_in.dim() == 2 && x_in.size(1) == weight_in.size(1),
           "linear: input {} does not match weight {}", x_in.str(), weight_in.str());
  const DType dt = autocast::compute_dtype(x_in);
  const Tensor x = cast(x_in, dt), weight = cast(weight_in, dt);
  const Tensor bias = bias_in.defined() ? cast(bias_in, dt) : Tensor();
  detail::check_same("linear", x, weight);
  detail::check_same("linear", x, bias);
  const int64_t m = x.size(0), k = x.size(1), n = weight.size(0);
  if (bias.defined()) CG_CHECK(bias.numel() == n, "linear: bias {} for {} outputs", bias.str(), n);
  Tensor y = Tensor::empty({m, n}, x.dtype(), x.device());
  const void* b = bias.defined() ? bias.raw_data() : nullptr;
  if (detail::on_gpu("linear", x)) {
    kernels::cuda::linear_forward(m, k, n, dt, x.raw_data(), weight.raw_data(), b, y.raw_data(), detail::stream_of(x));
  } else {
    detail::dispatch_floating("linear", x, [&]<typename T>() {
      kernels::cpu::linear_forward<T>(m, k, n, x.data<T>(), weight.data<T>(), static_cast<const T*>(b), y.data<T>());
    });
  }
  if (autograd::any_requires_grad({&x, &weight, &bias})) {
    auto node = std::make_shared<LinearBackward>(x.detach(), weight.detach(), bias.defined());
    autograd::connect(y, node, {&x, &weight, &bias});
  }
  return y;
}

}  // namespace cg::ops
