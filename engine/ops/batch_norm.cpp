// batch_norm: training mode (batch statistics, running-stat update) and eval mode, on the CPU or
// the GPU (hand-written kernels or cuDNN, ops::gpu_kernels().batch_norm). On the GPU the
// activations may be half while the parameters and statistics stay float32 (mixed precision).
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
  // Training: `mean`/`invstd` are the saved batch statistics. Eval: they are the running mean and
  // running var (copies, so a later update of the buffers cannot change this backward).
  // relu_y: the fused ReLU's output, undefined without one.
  BatchNormBackward(bool training, Tensor x, Tensor gamma, Tensor mean, Tensor invstd_or_var,
                    Tensor relu_y, double eps, BatchNormShape s, bool cudnn)
      : training_(training), x_(std::move(x)), gamma_(std::move(gamma)), mean_(std::move(mean)),
        stat_(std::move(invstd_or_var)), relu_y_(std::move(relu_y)), eps_(eps), s_(s), cudnn_(cudnn) {}
  std::string name() const override { return "BatchNormBackward"; }
  void release_saved() override { x_ = gamma_ = mean_ = stat_ = relu_y_ = {}; }

  std::vector<Tensor> apply(const Tensor& dy) override {
    std::vector<Tensor> grads(3);
    Tensor dx = Tensor::empty(x_.shape(), x_.dtype(), x_.device());
    Tensor dgamma = Tensor::empty({s_.c}, gamma_.dtype(), gamma_.device());
    Tensor dbeta = Tensor::empty({s_.c}, gamma_.dtype(), gamma_.device());
    if (detail::on_gpu("batch_norm backward", dy)) {
      apply_gpu(dy, dx, dgamma, dbeta);
    } else {
      detail::dispatch_floating("batch_norm backward", dy, [&]<typename T>() {
        const T* relu_y = relu_y_.defined() ? relu_y_.data<T>() : nullptr;
        if (training_) {
          kernels::cpu::batchnorm_backward_train<T>(s_, dy.data<T>(), x_.data<T>(), gamma_.data<T>(),
                                                    mean_.data<T>(), stat_.data<T>(), dx.data<T>(),
                                                    dgamma.data<T>(), dbeta.data<T>(), relu_y);
        } else {
          kernels::cpu::batchnorm_backward_eval<T>(s_, dy.data<T>(), x_.data<T>(), gamma_.data<T>(),
                                                   mean_.data<T>(), stat_.data<T>(), T(eps_), dx.data<T>(),
                                                   dgamma.data<T>(), dbeta.data<T>(), relu_y);
        }
      });
    }
    if (needs_grad(0)) grads[0] = dx;
    if (needs_grad(1)) grads[1] = dgamma;
    if (needs_grad(2)) grads[2] = dbeta;
    return grads;
  }

 private:
  void apply_gpu(const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
    const auto stream = detail::stream_of(dy);
    const void* relu_y = relu_y_.defined() ? relu_y_.raw_data() : nullptr;
    const DType dt = x_.dtype();
    if (!training_) {
      cu::batchnorm_backward_eval(s_, dt, dy.raw_data(), x_.raw_data(), f32(gamma_), f32(mean_), f32(stat_),
                                  float(eps_), dx.raw_data(), f32m(dgamma), f32m(dbeta), relu_y, stream);
    } else if (cudnn_) {
      std::vector<Tensor> scratch;
      cu::batchnorm_cudnn_backward_train(s_, dt, dy.raw_data(), x_.raw_data(), f32(gamma_), f32(mean_), f32(stat_),
                                         float(eps_), dx.raw_data(), f32m(dgamma), f32m(dbeta), relu_y,
                                         detail::workspace(dy.device(), scratch), stream);
    } else {
      cu::batchnorm_backward_train(s_, dt, dy.raw_data(), x_.raw_data(), f32(gamma_), f32(mean_), f32(stat_),
                                   dx.raw_data(), f32m(dgamma), f32m(dbeta), relu_y, stream);
    }
  }

  bool training_;
  Tensor x_, gamma_, mean_, stat_, relu_y_;
  double eps_;
  BatchNormShape s_;
  bool cudnn_;
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

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                  const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& num_batches_tracked, BatchNormOptions options) {
  CG_CHECK(x.dim() == 4, "batch_norm: input {} must be 4-D (NCHW)", x.str());
  const int64_t c = x.size(1);
  for (const Tensor* t : {&weight, &bias, &running_mean, &running_var}) check_channel_tensor(x, *t, c);
  BatchNormShape s{x.size(0), c, x.size(2) * x.size(3)};
  if (options.training)
    CG_CHECK(s.n * s.hw > 1, "batch_norm: training needs more than one value per channel, got {}",
             x.str());
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor mean, stat;
  if (options.training) {
    mean = Tensor::empty({c}, weight.dtype(), x.device());
    stat = Tensor::empty({c}, weight.dtype(), x.device());
  }
  bool cudnn = false;
  if (detail::on_gpu("batch_norm", x)) {
    const auto stream = detail::stream_of(x);
    cudnn = options.training && use_cudnn(s, x);
    const float eps = float(options.eps), momentum = float(options.momentum);
    if (!options.training) {
      cu::batchnorm_forward_eval(s, x.dtype(), x.raw_data(), f32(weight), f32(bias), f32(running_mean),
                                 f32(running_var), eps, y.raw_data(), options.activation, stream);
    } else if (cudnn) {
      cu::batchnorm_cudnn_forward_train(s, x.dtype(), x.raw_data(), f32(weight), f32(bias), eps, momentum,
                                        f32m(running_mean), f32m(running_var), y.raw_data(), f32m(mean),
                                        f32m(stat), options.activation, stream);
    } else {
      cu::batchnorm_forward_train(s, x.dtype(), x.raw_data(), f32(weight), f32(bias), eps, momentum,
                                  f32m(running_mean), f32m(running_var), y.raw_data(), f32m(mean), f32m(stat),
                                  options.activation, stream);
    }
    if (options.training && num_batches_tracked.defined())
      cu::increment_i64(num_batches_tracked.data<int64_t>(), 1, stream);
  } else {
    detail::dispatch_floating("batch_norm", x, [&]<typename T>() {
      if (options.training) {
        kernels::cpu::batchnorm_forward_train<T>(s, x.data<T>(), weight.data<T>(), bias.data<T>(),
                                                 T(options.eps), T(options.momentum),
                                                 running_mean.data<T>(), running_var.data<T>(),
                                                 y.data<T>(), mean.data<T>(), stat.data<T>(),
                                                 options.activation);
      } else {
        kernels::cpu::batchnorm_forward_eval<T>(s, x.data<T>(), weight.data<T>(), bias.data<T>(),
                                                running_mean.data<T>(), running_var.data<T>(),
                                                T(options.eps), y.data<T>(), options.activation);
      }
    });
    if (options.training && num_batches_tracked.defined()) num_batches_tracked.data<int64_t>()[0] += 1;
  }
  if (autograd::any_requires_grad({&x, &weight, &bias})) {
    if (!options.training) {
      mean = running_mean.clone();
      stat = running_var.clone();
    }
    const bool relu = options.activation == kernels::cpu::Activation::relu;
    auto node = std::make_shared<BatchNormBackward>(options.training, x.detach(), weight.detach(),
                                                    mean, stat, relu ? y.detach() : Tensor(),
                                                    options.eps, s, cudnn);
    autograd::connect(y, node, {&x, &weight, &bias});
  }
  return y;
}

}  // namespace cg::ops
