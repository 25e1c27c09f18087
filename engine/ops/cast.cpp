// cast: the differentiable dtype conversion autocast inserts (float32 master weights to half
// copies, half logits to float32), and the process-wide GPU kernel choice.
#include <atomic>

#include "engine/autograd/node.h"
#include "engine/ops.h"

namespace cg::ops {
namespace {

class CastBackward : public autograd::Node {
 public:
  explicit CastBackward(DType input_dtype) : input_dtype_(input_dtype) {}
  std::string name() const override { return "CastBackward"; }
  std::vector<Tensor> apply(const Tensor& dy) override { return {dy.to(input_dtype_)}; }

 private:
  DType input_dtype_;
};

std::atomic<GpuImpl> conv_impl{GpuImpl::automatic};
std::atomic<GpuImpl> batch_norm_impl{GpuImpl::automatic};

}  // namespace

void set_gpu_kernels(const GpuKernels& kernels) {
  conv_impl = kernels.conv;
  batch_norm_impl = kernels.batch_norm;
}
GpuKernels gpu_kernels() { return {conv_impl.load(), batch_norm_impl.load()}; }

Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  CG_CHECK(is_floating(x.dtype()) && is_floating(dtype), "cast: {} to {}: only between floating types",
           x.str(), dtype_name(dtype));
  Tensor y = x.to(dtype);
  if (autograd::any_requires_grad({&x})) autograd::connect(y, std::make_shared<CastBackward>(x.dtype()), {&x});
  return y;
}

}  // namespace cg::ops
