// Whether ops record the backward graph, per thread (like torch.no_grad). Evaluation, optimizer
// steps and running-statistics updates run under NoGradGuard.
#pragma once

namespace cg::autograd {

bool grad_enabled();

class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace cg::autograd
