// torch.optim.SGD's and AdamW's hyperparameters: one struct each, in the lowest layer so that the
// update kernels (kernels/), the engine's optimizer ops (engine/optim_ops.h) and the optimizers
// (nn/optimizer.h) all take the same one. lr is the initial rate; the optimizers' step() is given
// the scheduled one.
#pragma once

namespace cg {

struct SgdOptions {
  float lr = 0.01f, momentum = 0.f, weight_decay = 0.f, dampening = 0.f;
  bool nesterov = false;
};

struct AdamWOptions {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 1e-2f;
};

}  // namespace cg
