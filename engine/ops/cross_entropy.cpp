// cross_entropy: mean over the batch of -log softmax(logits)[label], always in float32 on the GPU
// (as autocast does: the loss is where half precision would hurt), with the hit count for
// accuracy computed in the same pass: the CPU reference (kernels/cpu/loss.h, float32 and float64;
// labels checked on the host) or the CUDA kernels (kernels/cuda/head.h, float32), by the device.
#include "engine/autograd/node.h"
#include "engine/ops.h"
#include "engine/dispatch.h"
#include "kernels/cpu/loss.h"
#include "kernels/cuda/device_error.h"
#include "kernels/cuda/head.h"

namespace cg::ops {
namespace {

// Writes loss (a scalar), probs [n, classes] (softmax, kept for the backward) and hits (int64
// scalar). A label outside [0, classes) is an error (on the GPU reported at the next host read).
void forward_into(const Tensor& logits, const Tensor& labels, Tensor& loss, Tensor& probs, Tensor& hits) {
  const int64_t n = logits.size(0), classes = logits.size(1);
  detail::on_device(
      "cross_entropy", logits,
      [&]<typename T>() {
        const int64_t* lab = labels.data<int64_t>();
        for (int64_t i = 0; i < n; ++i)
          CG_CHECK(lab[i] >= 0 && lab[i] < classes, "cross_entropy: label {} at row {} outside [0, {})", lab[i], i,
                   classes);
        hits.data<int64_t>()[0] =
            kernels::cpu::cross_entropy_forward<T>(n, classes, logits.data<T>(), lab, loss.data<T>(), probs.data<T>());
      },
      [&] {
        // The kernel checks the labels and records a bad one for the host (kernels/cuda/device_error.h):
        // reported when the host next reads from the device (the loss) or here, at the next call.
        // Checking them here would stall the host every step.
        kernels::cuda::raise_device_error();
        kernels::cuda::cross_entropy_forward(n, classes, logits.data<float>(), labels.data<int64_t>(),
                                             loss.data<float>(), probs.data<float>(), hits.data<int64_t>(),
                                             detail::stream_of(logits));
      });
}

// dlogits = dloss * (probs - one_hot(labels)) / n; dloss is a scalar on the logits' device (on the
// GPU, a loss scale for instance, the host never reads it).
void backward_into(const Tensor& dloss, const Tensor& probs, const Tensor& labels, Tensor& dlogits) {
  const int64_t n = probs.size(0), classes = probs.size(1);
  detail::on_device(
      "cross_entropy backward", probs,
      [&]<typename T>() {
        kernels::cpu::cross_entropy_backward<T>(n, classes, T(dloss.item()), probs.data<T>(), labels.data<int64_t>(),
                                                dlogits.data<T>());
      },
      [&] {
        kernels::cuda::cross_entropy_backward(n, classes, dloss.data<float>(), probs.data<float>(),
                                              labels.data<int64_t>(), dlogits.data<float>(), detail::stream_of(probs));
      });
}

class CrossEntropyBackward : public autograd::Node {
 public:
  CrossEntropyBackward(Tensor probs, Tensor labels) : probs_(std::move(probs)), labels_(std::move(labels)) {}
  std::string name() const override { return "CrossEntropyBackward"; }
  void release_saved() override { probs_ = labels_ = {}; }
  std::vector<Tensor> apply(const Tensor& dloss) override {
    Tensor dlogits = Tensor::empty(probs_.shape(), probs_.dtype(), probs_.device());
    backward_into(dloss, probs_, labels_, dlogits);
    return {dlogits, Tensor()};
  }

 private:
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
  const Device device = logits.device();
  Tensor loss = Tensor::empty({}, logits.dtype(), device);
  Tensor probs = Tensor::empty(logits.shape(), logits.dtype(), device);
  Tensor hits = Tensor::empty({}, DType::i64, device);
  forward_into(logits, labels, loss, probs, hits);
  if (correct) *correct = hits;
  if (autograd::any_requires_grad({&logits}))
    autograd::connect(loss, std::make_shared<CrossEntropyBackward>(probs, labels.detach()), {&logits, nullptr});
  return loss;
}

}  // namespace cg::ops
