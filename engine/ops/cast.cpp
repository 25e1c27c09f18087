// cast: the differentiable dtype conversion autocast inserts (float32 master weights to half
// copies, half logits to float32).
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

}  // namespace

Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  CG_CHECK(is_floating(x.dtype()) && is_floating(dtype), "cast: {} to {}: only between floating types",
           x.str(), dtype_name(dtype));
  Tensor y = x.to(dtype);
  if (autograd::any_requires_grad({&x})) autograd::connect(y, std::make_shared<CastBackward>(x.dtype()), {&x});
  return y;
}

}  // namespace cg::ops
