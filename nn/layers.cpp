#include "nn/layers.h"

#include <cmath>

#include "engine/ops.h"

namespace cg::nn {

Conv2d::Conv2d(const Conv2dOptions& o, Generator& gen) : options_(o) {
  Tensor w = Tensor::empty({o.out_channels, o.in_channels, o.kernel_size, o.kernel_size});
  // kaiming_normal_(mode="fan_out", nonlinearity="relu"): std = sqrt(2 / fan_out).
  const double fan_out = double(o.out_channels * o.kernel_size * o.kernel_size);
  normal_(w, gen, 0.0, std::sqrt(2.0 / fan_out));
  weight_ = register_parameter("weight", w);
  if (o.bias) {
    Tensor b = Tensor::empty({o.out_channels});
    const double bound = 1.0 / std::sqrt(double(o.in_channels * o.kernel_size * o.kernel_size));
    uniform_(b, gen, -bound, bound);
    bias_ = register_parameter("bias", b);
  }
}

Tensor Conv2d::forward(const Tensor& x) {
  return ops::conv2d(x, weight_, bias_, {.stride = options_.stride, .padding = options_.padding});
}

BatchNorm2d::BatchNorm2d(int64_t channels, double eps, double momentum) : eps_(eps), momentum_(momentum) {
  weight_ = register_parameter("weight", Tensor::full({channels}, 1.0));
  bias_ = register_parameter("bias", Tensor::zeros({channels}));
  running_mean_ = register_buffer("running_mean", Tensor::zeros({channels}));
  running_var_ = register_buffer("running_var", Tensor::full({channels}, 1.0));
  num_batches_tracked_ = register_buffer("num_batches_tracked", Tensor::zeros({}, DType::i64));
}

ops::BatchNormOptions BatchNorm2d::options(ops::Activation act) const {
  return {.training = is_training(), .momentum = momentum_, .eps = eps_, .activation = act,
          .cross_replica = cross_replica_};
}
Tensor BatchNorm2d::forward(const Tensor& x) {
  return ops::batch_norm(x, weight_, bias_, running_mean_, running_var_, num_batches_tracked_,
                         options(ops::Activation::none));
}
Tensor BatchNorm2d::forward_relu(const Tensor& x) {
  return ops::batch_norm(x, weight_, bias_, running_mean_, running_var_, num_batches_tracked_,
                         options(ops::Activation::relu));
}
Tensor BatchNorm2d::forward_add_relu(const Tensor& x, const Tensor& residual) {
  return ops::batch_norm_add_relu(x, residual, weight_, bias_, running_mean_, running_var_,
                                  num_batches_tracked_, options(ops::Activation::relu));
}

Linear::Linear(const LinearOptions& o, Generator& gen) {
  const double bound = 1.0 / std::sqrt(double(o.in_features));
  Tensor w = Tensor::empty({o.out_features, o.in_features});
  uniform_(w, gen, -bound, bound);
  weight_ = register_parameter("weight", w);
  if (o.bias) {
    Tensor b = Tensor::empty({o.out_features});
    uniform_(b, gen, -bound, bound);
    bias_ = register_parameter("bias", b);
  }
}

Tensor Linear::forward(const Tensor& x) { return ops::linear(x, weight_, bias_); }

}  // namespace cg::nn
