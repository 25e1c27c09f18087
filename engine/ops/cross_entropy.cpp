// cross_entropy: mean over the batch of -log softmax(logits)[label], always in float32 on the GPU
// (as autocast does: the loss is where half precision would hurt), with the hit count for
// accuracy computed in the same pass. The implementation comes from the loss registry
// (engine/impl/loss.h); the backward node keeps the one that ran the forward.
#include "engine/autograd/node.h"
#include "engine/impl/loss.h"
#include "engine/ops.h"
#include "engine/ops/dispatch.h"

namespace cg::ops {
namespace {

class CrossEntropyBackward : public autograd::Node {
 public:
  CrossEntropyBackward(std::shared_ptr<const impl::LossImpl> impl, impl::LossProblem p, Tensor probs, Tensor labels)
      : impl_(std::move(impl)), p_(p), probs_(std::move(probs)), labels_(std::move(labels)) {}
  std::string name() const override { return "CrossEntropyBackward"; }
  void release_saved() override { probs_ = labels_ = {}; }
  std::vector<Tensor> apply(const Tensor& dloss) override {
    Tensor dlogits = Tensor::empty(probs_.shape(), probs_.dtype(), probs_.device());
    impl_->backward(p_, dloss, probs_, labels_, dlogits);
    return {dlogits, Tensor()};
  }

 private:
  std::shared_ptr<const impl::LossImpl> impl_;  // the implementation that ran the forward
  impl::LossProblem p_;
  Tensor probs_, labels_;
};

}  // namespace

Tensor cross_entropy(const Tensor& logits_in, const Tensor& labels, Tensor* correct) {
  CG_CHECK(logits_in.dim() == 2, "cross_entropy: logits {} must be [N, classes]", logits_in.str());
  CG_CHECK(labels.dtype() == DType::i64 && labels.dim() == 1 && labels.size(0) == logits_in.size(0) &&
               labels.device() == logits_in.device(),
           "cross_entropy: labels {} for logits {}", labels.str(), logits_in.str());
  const bool gpu = detail::on_gpu("cross_entropy", logits_in);
  const Tensor logits = gpu ? cast(logits_in, DType::f32) : logits_in;
  const impl::LossProblem p{logits.size(0), logits.size(1), logits.device(), logits.dtype()};
  auto implementation = impl::loss_registry().pick(p, impl::Choice::automatic, [&] {
    return fmt::format("cross_entropy with logits {} and labels {}", logits.str(), labels.str());
  });
  Tensor loss = Tensor::empty({}, logits.dtype(), p.device);
  Tensor probs = Tensor::empty(logits.shape(), logits.dtype(), p.device);
  Tensor hits = Tensor::empty({}, DType::i64, p.device);
  implementation->forward(p, logits, labels, loss, probs, hits);
  if (correct) *correct = hits;
  if (autograd::any_requires_grad({&logits}))
    autograd::connect(loss,
                      std::make_shared<CrossEntropyBackward>(std::move(implementation), p, probs, labels.detach()),
                      {&logits, nullptr});
  return loss;
}

}  // namespace cg::ops
