// batch_norm and batch_norm_add_relu: training mode (batch statistics, running-stat update) and
// eval mode, NCHW or channels-last, on the CPU or the GPU (hand-written kernels or cuDNN,
// ops::gpu_kernels().batch_norm). On the GPU the activations may be half while the parameters and
// statistics stay float32 (mixed precision). Channels-last is the same computation over the shape
// {N * H * W, C, 1} (kernels::cpu::channels_last_shape); the GPU kernels read it along rows.
#include "engine/autograd/node.h"
#include "engine/ops.h"
#include "engine/ops/dispatch.h"
#include "kernels/cpu/batchnorm.h"
#include "kernels/cuda/batchnorm.h"
#include "kernels/cuda/counter.h"
#include "kernels/cuda/cudnn.h"

namespace cg::ops {
namespace {

using kernels::cpu::BatchNormShape;
namespace cu = kernels::cuda;

bool use_cudnn(const BatchNormShape& s, const Tensor& x) {
  GpuImpl impl = gpu_kernels().batch_norm;
  if (impl == GpuImpl::automatic) impl = GpuImpl::native;
  if (impl == GpuImpl::native) return false;
  CG_CHECK(cu::batchnorm_cudnn_supports(s, x.dtype()),
           "batch_norm layer with input {}: kernels.batch_norm=cudnn does not support it", x.str());
  return true;
}

const float* f32(const Tensor& t) { return t.data<float>(); }
float* f32m(const Tensor& t) { return t.data<float>(); }

class BatchNormBackward : public autograd::Node {
 public:
  // What the forward saved. Training: `mean`/`stat` are the batch mean and invstd. Eval: they are
  // the running mean and running var (copies, so a later update of the buffers cannot change this
  // backward). relu_y: the fused ReLU's output, undefined without one. A fused residual is the
  // fourth input; its gradient is the one reaching the normalization.
  struct Saved {
    bool training, cudnn, residual;
    Tensor x, gamma, mean, stat, relu_y;
    double eps;
    BatchNormShape shape;
  };
  explicit BatchNormBackward(Saved saved) : v_(std::move(saved)) {}
  std::string name() const override { return v_.residual ? "BatchNormAddReluBackward" : "BatchNormBackward"; }
  void release_saved() override { v_.x = v_.gamma = v_.mean = v_.stat = v_.relu_y = {}; }

  std::vector<Tensor> apply(const Tensor& dy) override {
    const Tensor& x = v_.x;
    Tensor dx = Tensor::empty(x.shape(), x.dtype(), x.device());
    Tensor dgamma = Tensor::empty({v_.shape.c}, v_.gamma.dtype(), x.device());
    Tensor dbeta = Tensor::empty({v_.shape.c}, v_.gamma.dtype(), x.device());
    // Written whenever there is a residual, needed or not: the kernels' dx pass reads it back.
    Tensor d_residual = v_.residual ? Tensor::empty(x.shape(), x.dtype(), x.device()) : Tensor();
    if (detail::on_gpu("batch_norm backward", dy)) {
      apply_gpu(dy, dx, dgamma, dbeta, d_residual);
    } else {
      detail::dispatch_floating("batch_norm backward", dy, [&]<typename T>() {
        const T* relu_y = v_.relu_y.defined() ? v_.relu_y.data<T>() : nullptr;
        T* d_res = d_residual.defined() ? d_residual.data<T>() : nullptr;
        if (v_.training) {
          kernels::cpu::batchnorm_backward_train<T>(v_.shape, dy.data<T>(), x.data<T>(), v_.gamma.data<T>(),
                                                    v_.mean.data<T>(), v_.stat.data<T>(), dx.data<T>(),
                                                    dgamma.data<T>(), dbeta.data<T>(), relu_y, d_res);
        } else {
          kernels::cpu::batchnorm_backward_eval<T>(v_.shape, dy.data<T>(), x.data<T>(), v_.gamma.data<T>(),
                                                   v_.mean.data<T>(), v_.stat.data<T>(), T(v_.eps), dx.data<T>(),
                                                   dgamma.data<T>(), dbeta.data<T>(), relu_y, d_res);
        }
      });
    }
    std::vector<Tensor> grads(v_.residual ? 4 : 3);
    if (needs_grad(0)) grads[0] = dx;
    if (needs_grad(1)) grads[1] = dgamma;
    if (needs_grad(2)) grads[2] = dbeta;
    if (needs_grad(3)) grads[3] = d_residual;
    return grads;
  }

 private:
  void apply_gpu(const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, Tensor& d_residual) {
    const auto stream = detail::stream_of(dy);
    const void* relu_y = v_.relu_y.defined() ? v_.relu_y.raw_data() : nullptr;
    void* d_res = d_residual.defined() ? d_residual.raw_data() : nullptr;
    const DType dt = v_.x.dtype();
    const BatchNormShape& s = v_.shape;
    if (!v_.training) {
      cu::batchnorm_backward_eval(s, dt, dy.raw_data(), v_.x.raw_data(), f32(v_.gamma), f32(v_.mean), f32(v_.stat),
                                  float(v_.eps), dx.raw_data(), f32m(dgamma), f32m(dbeta), relu_y, d_res, stream);
    } else if (v_.cudnn) {
      std::vector<Tensor> scratch;
      cu::batchnorm_cudnn_backward_train(s, dt, dy.raw_data(), v_.x.raw_data(), f32(v_.gamma), f32(v_.mean),
                                         f32(v_.stat), float(v_.eps), dx.raw_data(), f32m(dgamma), f32m(dbeta),
                                         relu_y, d_res, detail::workspace(dy.device(), scratch), stream);
    } else {
      cu::batchnorm_backward_train(s, dt, dy.raw_data(), v_.x.raw_data(), f32(v_.gamma), f32(v_.mean), f32(v_.stat),
                                   dx.raw_data(), f32m(dgamma), f32m(dbeta), relu_y, d_res, stream);
    }
  }

  Saved v_;
};

// Per-channel tensors: on the CPU the input's dtype; on the GPU float32 whatever the input's.
void check_channel_tensor(const Tensor& x, const Tensor& t, int64_t c) {
  CG_CHECK(t.defined() && t.numel() == c, "batch_norm: per-channel tensor {} for {} channels", t.str(), c);
  if (x.device().is_cuda())
    CG_CHECK(t.device() == x.device() && t.dtype() == DType::f32,
             "batch_norm: {} must be float32 on {} (input {})", t.str(), x.device().str(), x.str());
  else
    detail::check_same("batch_norm", x, t);
}

BatchNormShape shape_of(const Tensor& x, Layout layout) {
  CG_CHECK(x.dim() == 4, "batch_norm: input {} must be 4-D ({})", x.str(),
           layout == Layout::nhwc ? "NHWC" : "NCHW");
  if (layout == Layout::nhwc)
    return kernels::cpu::channels_last_shape(x.size(0), x.size(1), x.size(2), x.size(3));
  return {x.size(0), x.size(1), x.size(2) * x.size(3)};
}

// y = act(bn(x) [+ residual]); residual may be undefined.
Tensor batch_norm_impl(const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                       const Tensor& running_mean, const Tensor& running_var, const Tensor& num_batches_tracked,
                       const BatchNormOptions& options) {
  const BatchNormShape s = shape_of(x, options.layout);
  const int64_t c = s.c;
  for (const Tensor* t : {&weight, &bias, &running_mean, &running_var}) check_channel_tensor(x, *t, c);
  if (residual.defined()) {
    detail::check_same("batch_norm_add_relu", x, residual);
    CG_CHECK(residual.shape() == x.shape(), "batch_norm_add_relu: residual {} and input {} differ in shape",
             residual.str(), x.str());
  }
  if (options.training)
    CG_CHECK(s.n * s.hw > 1, "batch_norm: training needs more than one value per channel, got {}", x.str());
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mean, stat;
  if (options.training) {
    mean = Tensor::empty({c}, weight.dtype(), x.device());
    stat = Tensor::empty({c}, weight.dtype(), x.device());
  }
  bool cudnn = false;
  if (detail::on_gpu("batch_norm", x)) {
    const auto stream = detail::stream_of(x);
    const void* r = residual.defined() ? residual.raw_data() : nullptr;
    cudnn = options.training && use_cudnn(s, x);
    const float eps = float(options.eps), momentum = float(options.momentum);
    if (!options.training) {
      cu::batchnorm_forward_eval(s, x.dtype(), x.raw_data(), f32(weight), f32(bias), f32(running_mean),
                                 f32(running_var), eps, y.raw_data(), options.activation, r, stream);
    } else if (cudnn) {
      cu::batchnorm_cudnn_forward_train(s, x.dtype(), x.raw_data(), f32(weight), f32(bias), eps, momentum,
                                        f32m(running_mean), f32m(running_var), y.raw_data(), f32m(mean),
                                        f32m(stat), options.activation, r, stream);
    } else {
      cu::batchnorm_forward_train(s, x.dtype(), x.raw_data(), f32(weight), f32(bias), eps, momentum,
                                  f32m(running_mean), f32m(running_var), y.raw_data(), f32m(mean), f32m(stat),
                                  options.activation, r, stream);
    }
    if (options.training && num_batches_tracked.defined())
      cu::increment_i64(num_batches_tracked.data<int64_t>(), 1, stream);
  } else {
    detail::dispatch_floating("batch_norm", x, [&]<typename T>() {
      const T* r = residual.defined() ? residual.data<T>() : nullptr;
      if (options.training) {
        kernels::cpu::batchnorm_forward_train<T>(s, x.data<T>(), weight.data<T>(), bias.data<T>(),
                                                 T(options.eps), T(options.momentum),
                                                 running_mean.data<T>(), running_var.data<T>(),
                                                 y.data<T>(), mean.data<T>(), stat.data<T>(),
                                                 options.activation, r);
      } else {
        kernels::cpu::batchnorm_forward_eval<T>(s, x.data<T>(), weight.data<T>(), bias.data<T>(),
                                                running_mean.data<T>(), running_var.data<T>(),
                                                T(options.eps), y.data<T>(), options.activation, r);
      }
    });
    if (options.training && num_batches_tracked.defined()) num_batches_tracked.data<int64_t>()[0] += 1;
  }
  if (autograd::any_requires_grad({&x, &weight, &bias, &residual})) {
    if (!options.training) {
      mean = running_mean.clone();
      stat = running_var.clone();
    }
    const bool relu = options.activation == kernels::cpu::Activation::relu;
    auto node = std::make_shared<BatchNormBackward>(BatchNormBackward::Saved{
        options.training, cudnn, residual.defined(), x.detach(), weight.detach(), mean, stat,
        relu ? y.detach() : Tensor(), options.eps, s});
    if (residual.defined())
      autograd::connect(y, node, {&x, &weight, &bias, &residual});
    else
      autograd::connect(y, node, {&x, &weight, &bias});
  }
  return y;
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& num_batches_tracked, BatchNormOptions options) {
  return batch_norm_impl(x, Tensor(), weight, bias, running_mean, running_var, num_batches_tracked, options);
}

Tensor batch_norm_add_relu(const Tensor& x, const Tensor& residual, const Tensor& weight,
                           const Tensor& bias, const Tensor& running_mean,
                           const Tensor& running_var, const Tensor& num_batches_tracked,
                           BatchNormOptions options) {
  CG_CHECK(residual.defined(), "batch_norm_add_relu: the residual is undefined");
  options.activation = Activation::relu;
  return batch_norm_impl(x, residual, weight, bias, running_mean, running_var, num_batches_tracked, options);
}

}  // namespace cg::ops
