// The reference dist.param_dtype is tested against: DDP whose parameters are rounded to a 16-bit
// type for a forward and backward, and whose float32 values (the masters) are put back before the
// optimizer steps them, as full_shard's 16-bit gathers leave the kernels and the shards.
#pragma once
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "nn/module.h"

namespace cg::test {

class RoundedParameters {
 public:
  // Rounds every parameter of `model` to `dtype` (nothing for f32) until restore().
  RoundedParameters(nn::Module& model, DType dtype) : model_(model) {
    if (dtype == DType::f32) return;
    autograd::NoGradGuard no_grad;
    for (auto& [name, p] : model_.named_parameters()) {
      masters_.push_back(p.clone());
      p.copy_(p.to(dtype));
    }
  }
  void restore() {
    autograd::NoGradGuard no_grad;
    size_t i = 0;
    for (auto& [name, p] : model_.named_parameters())
      if (i < masters_.size()) p.copy_(masters_[i++]);
    masters_.clear();
  }

 private:
  nn::Module& model_;
  std::vector<Tensor> masters_;
};

}  // namespace cg::test
