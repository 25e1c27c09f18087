// The cross-replica hook of BatchNorm2d (engine/cross_replica.h) with a fake in place of dist's:
// exactly one sum per layer per direction in training and none in eval; with one replica the
// hooked model trains like the plain one; with the sum doubling everything (two identical
// replicas) the outputs stay and the running variance uses the doubled count.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/autograd/grad_mode.h"
#include "engine/ops.h"
#include "nn/layers.h"
#include "nn/miniresnet.h"
#include "support/tiny_batches.h"
#include "support/tolerance.h"

namespace cg::nn {
namespace {

// Counts its calls and multiplies the values by `factor` (the sum over `factor` equal replicas).
class FakeSum : public CrossReplicaSum {
 public:
  explicit FakeSum(double factor) : factor_(factor) {}
  void sum(Tensor& values, Pass pass) override {
    EXPECT_EQ(values.dtype(), DType::f64);
    (pass == Pass::forward ? forward : backward) += 1;
    for (int64_t i = 0; i < values.numel(); ++i) values.data<double>()[i] *= factor_;
  }
  int forward = 0, backward = 0;

 private:
  double factor_;
};

int hook_every_batch_norm(Module& m, const std::shared_ptr<CrossReplicaSum>& sum) {
  int layers = 0;
  m.for_each_module([&](const std::string&, Module& child) {
    if (auto* bn = dynamic_cast<BatchNorm2d*>(&child)) {
      bn->set_cross_replica(sum);
      ++layers;
    }
  });
  return layers;
}

std::vector<float> gradients(const Module& m) {
  std::vector<float> out;
  for (auto& [name, p] : m.named_parameters()) {
    const auto g = p.grad().to_vector<float>();
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}

TEST(SyncBatchNormHook, OneSumPerLayerPerDirectionAndTheSameTrainingWithOneReplica) {
  Generator g1(5), g2(5);
  MiniResNet plain(test::tiny_resnet(), g1), hooked(test::tiny_resnet(), g2);
  auto sum = std::make_shared<FakeSum>(1.0);
  const int layers = hook_every_batch_norm(hooked, sum);
  EXPECT_EQ(layers, 6);  // the stem, 2 in the first block, 3 in the second (its shortcut's too)
  const Tensor x = test::union_images(0, 5), labels = test::union_labels(0, 5);
  const Tensor plain_loss = ops::cross_entropy(plain(x), labels), hooked_loss = ops::cross_entropy(hooked(x), labels);
  EXPECT_EQ(sum->forward, layers);
  EXPECT_EQ(sum->backward, 0);
  plain_loss.backward();
  hooked_loss.backward();
  EXPECT_EQ(sum->backward, layers);
  EXPECT_NEAR(hooked_loss.item(), plain_loss.item(), 1e-6);
  EXPECT_TRUE(test::all_close(gradients(hooked), gradients(plain), {1e-5, 1e-4}));
  const NamedTensors p = plain.named_buffers(), h = hooked.named_buffers();
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i].second.dtype() != DType::f32) continue;  // running statistics, not num_batches_tracked
    EXPECT_TRUE(test::all_close(h[i].second.to_vector<float>(), p[i].second.to_vector<float>(), {1e-6, 1e-5}))
        << p[i].first;
  }

  hooked.eval();  // evaluation uses the running statistics: nothing to communicate
  autograd::NoGradGuard no_grad;
  hooked(x);
  EXPECT_EQ(sum->forward, layers);
}

TEST(SyncBatchNormHook, RunningVarianceUsesTheGlobalCount) {
  BatchNorm2d bn(2);
  bn.set_cross_replica(std::make_shared<FakeSum>(2.0));  // two replicas holding this same batch
  Tensor x = Tensor::empty({2, 2, 1, 2});                 // 4 values per channel
  const std::vector<float> v{1, 2, 3, 5, 4, 0, 2, 2};
  std::copy(v.begin(), v.end(), x.data<float>());
  const Tensor y = bn(x);
  const auto rv = bn.named_buffers()[1].second.to_vector<float>();
  // Channel 0 holds 1, 2, 4, 0: biased variance 2.1875 over 4 values; unbiased over 8 (= 2 x 4).
  EXPECT_NEAR(rv[0], 0.9 + 0.1 * 2.1875 * 8.0 / 7.0, 1e-6);
  const Tensor plain = ops::batch_norm(x, Tensor::full({2}, 1.0), Tensor::zeros({2}), Tensor::zeros({2}),
                                       Tensor::full({2}, 1.0), Tensor(), {});
  EXPECT_TRUE(test::all_close(y.to_vector<float>(), plain.to_vector<float>(), {1e-6, 1e-6}));
}

}  // namespace
}  // namespace cg::nn
