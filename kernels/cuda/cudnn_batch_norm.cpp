// Batch norm through cuDNN (spatial mode). cuDNN normalizes with the biased batch variance,
// keeps the running variance unbiased and saves 1/sqrt(var + eps): PyTorch's semantics, and the
// hand-written kernels'. Its classic API cannot fuse the ReLU or a residual, so they run as their
// own passes (in place on y), and backward masks dy into scratch (or d_residual) first.
// Channels-last activations arrive as {N * H * W, C, 1}: NCHW with 1x1 images, the same memory.
#include "kernels/cuda/cudnn.h"
#include "kernels/cuda/cudnn_common.h"
#include "kernels/cuda/elementwise.h"

namespace cg::kernels::cuda {
namespace {

using cudnn::TensorDesc;

// x's descriptor and the float32 per-channel descriptor cuDNN derives from it.
struct BnDescs {
  TensorDesc x;
  cudnnTensorDescriptor_t param = nullptr;
  BnDescs(const BatchNormShape& s, DType dtype) : x(dtype, s.n, s.c, s.hw, 1) {
    CG_CUDNN_CHECK(cudnnCreateTensorDescriptor(&param));
    CG_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(param, x.get(), CUDNN_BATCHNORM_SPATIAL));
  }
  ~BnDescs() {
    if (param) cudnnDestroyTensorDescriptor(param);
  }
};

int64_t numel(const BatchNormShape& s) { return s.n * s.c * s.hw; }

// y = act(y + residual), in place: what the hand-written kernels fuse into their output pass.
void finish_output(const BatchNormShape& s, DType dtype, void* y, Activation act, const void* residual,
                   Stream stream) {
  if (residual && act == Activation::relu) add_relu(numel(s), dtype, y, residual, y, stream);
  else if (residual) add(numel(s), dtype, y, residual, y, stream);
  else if (act == Activation::relu) relu_forward(numel(s), dtype, y, y, stream);
}

}  // namespace

bool batch_norm_cudnn_supports(const BatchNormShape& s, DType dtype) {
  return (dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16) && numel(s) < (int64_t(1) << 31);
}

void batch_norm_cudnn_forward_train(const BatchNormShape& s, DType dtype, const void* x, const float* gamma,
                                   const float* beta, float eps, float momentum, float* running_mean,
                                   float* running_var, void* y, float* save_mean, float* save_invstd,
                                   Activation act, const void* residual, Stream stream) {
  cudnnHandle_t h = cudnn::handle(stream);
  BnDescs d(s, dtype);
  const float one = 1.f, zero = 0.f;
  CG_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x.get(), x,
                                                        d.x.get(), y, d.param, gamma, beta, double(momentum),
                                                        running_mean, running_var, double(eps), save_mean,
                                                        save_invstd));
  finish_output(s, dtype, y, act, residual, stream);
}

void batch_norm_cudnn_forward_eval(const BatchNormShape& s, DType dtype, const void* x, const float* gamma,
                                  const float* beta, const float* running_mean, const float* running_var, float eps,
                                  void* y, Activation act, const void* residual, Stream stream) {
  cudnnHandle_t h = cudnn::handle(stream);
  BnDescs d(s, dtype);
  const float one = 1.f, zero = 0.f;
  CG_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x.get(), x,
                                                         d.x.get(), y, d.param, gamma, beta, running_mean,
                                                         running_var, double(eps)));
  finish_output(s, dtype, y, act, residual, stream);
}

void batch_norm_cudnn_backward_train(const BatchNormShape& s, DType dtype, const void* dy, const void* x,
                                    const float* gamma, const float* save_mean, const float* save_invstd,
                                    float eps, void* dx, float* dgamma, float* dbeta, const void* relu_y,
                                    void* d_residual, const WorkspaceFn& workspace, Stream stream) {
  cudnnHandle_t h = cudnn::handle(stream);
  BnDescs d(s, dtype);
  const void* g = dy;
  const size_t bytes = size_t(numel(s)) * itemsize(dtype);
  if (relu_y) {  // the fused ReLU's backward: dy where its output was positive
    void* masked = d_residual ? d_residual : workspace(bytes);
    relu_backward(numel(s), dtype, dy, relu_y, masked, stream);
    g = masked;
  } else if (d_residual) {  // no ReLU: the residual's gradient is dy itself
    copy_device_to_device(d_residual, dy, bytes, stream);
  }
  const float one = 1.f, zero = 0.f;
  CG_CUDNN_CHECK(cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, d.x.get(), x,
                                                 d.x.get(), g, d.x.get(), dx, d.param, gamma, dgamma, dbeta,
                                                 double(eps), save_mean, save_invstd));
}

}  // namespace cg::kernels::cuda
