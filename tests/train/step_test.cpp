// TrainStep::run_micro_step on the CPU (train/step.h): with train.grad_accum_steps=3 the optimizer
// steps on every third micro-batch, or earlier when the caller closes the group (an epoch's last
// batch), and the weights it reaches are bit for bit those of the phases called one by one (the
// loss divided over the group, the optimizer after the group's last backward). The phase hook
// fires at the end of each phase that ran, which is what cudagrad-bench's clock counts on.
#include <gtest/gtest.h>

#include <vector>

#include "support/tiny_batches.h"
#include "train/parts.h"

namespace cg::train {
namespace {

constexpr double kLr = 0.05;

TrainConfig config() {
  return load_train_config("", {"train.device=cpu", "train.threads=1", "train.grad_accum_steps=3",
                                "model.in_channels=2", "model.widths=[4,8]", "model.blocks=[1,1]",
                                "optim.name=sgd", "optim.momentum=0.9"});
}

// Micro-batch i: 4 deterministic images, distinct for every i.
data::DeviceBatch batch(int64_t i) { return {test::union_images(4 * i, 4), test::union_labels(4 * i, 4), 4}; }

std::vector<std::vector<float>> weights(nn::Module& model) {
  std::vector<std::vector<float>> out;
  for (const auto& [name, p] : model.named_parameters()) out.push_back(p.to_vector<float>());
  return out;
}

struct Session {
  TrainConfig c = config();
  DistContext dist{c.dist.timeout_s};
  TrainingParts parts{c, dist};
};

TEST(TrainStep, AccumulatesThreeMicroBatchesOrFewerWhenTheGroupIsClosed) {
  Session s;
  TrainStep& step = s.parts.step();
  const auto initial = weights(s.parts.model());
  EXPECT_FALSE(step.run_micro_step(batch(0), {.lr = kLr}).optimizer_stepped);
  EXPECT_FALSE(step.run_micro_step(batch(1), {.lr = kLr}).optimizer_stepped);
  EXPECT_EQ(weights(s.parts.model()), initial) << "a micro-batch inside its group stepped the optimizer";
  EXPECT_TRUE(step.run_micro_step(batch(2), {.lr = kLr}).optimizer_stepped);
  EXPECT_EQ(s.parts.optimizer().steps_taken(), 1);
  // A short group: closed by the caller after two micro-batches.
  EXPECT_FALSE(step.run_micro_step(batch(3), {.lr = kLr}).optimizer_stepped);
  EXPECT_TRUE(step.run_micro_step(batch(4), {.lr = kLr, .close_group = true}).optimizer_stepped);
  // The next group counts from its own start again.
  EXPECT_FALSE(step.run_micro_step(batch(5), {.lr = kLr}).optimizer_stepped);
  EXPECT_FALSE(step.run_micro_step(batch(6), {.lr = kLr}).optimizer_stepped);
  EXPECT_TRUE(step.run_micro_step(batch(7), {.lr = kLr}).optimizer_stepped);
  EXPECT_EQ(s.parts.optimizer().steps_taken(), 3);
}

TEST(TrainStep, MicroStepsGiveTheWeightsOfThePhasesCalledOneByOne) {
  const std::vector<int> groups = {3, 2, 3};  // micro-batches per optimizer step; the second closed early
  Session by_micro_step, by_phase;
  int64_t i = 0;
  for (const int size : groups) {
    for (int m = 0; m < size; ++m, ++i) {
      const bool last = m + 1 == size;
      const MicroStepOutputs out = by_micro_step.parts.step().run_micro_step(batch(i), {.lr = kLr, .close_group = last});
      EXPECT_EQ(out.optimizer_stepped, last);
      TrainStep& phases = by_phase.parts.step();
      const Tensor loss = phases.forward(batch(i), {.sync = last}, nullptr);
      phases.backward(loss);
      phases.wait_for_gradients();
      if (last) phases.optimizer_step(kLr);
      EXPECT_EQ(out.loss.item(), loss.item()) << "micro-batch " << i;
    }
  }
  EXPECT_EQ(weights(by_micro_step.parts.model()), weights(by_phase.parts.model()));
}

TEST(TrainStep, ThePhaseHookFiresAfterEachPhaseThatRan) {
  Session s;
  TrainStep& step = s.parts.step();
  int ends = 0;
  step.on_phase_end([&] { ++ends; });
  step.run_micro_step(batch(0), {.lr = kLr});
  EXPECT_EQ(ends, 3) << "forward, backward, the wait; no optimizer inside the group";
  step.run_micro_step(batch(1), {.lr = kLr, .close_group = true});
  EXPECT_EQ(ends, 7) << "and the optimizer at the group's end";
  step.on_phase_end(nullptr);
  step.run_micro_step(batch(2), {.lr = kLr});
  EXPECT_EQ(ends, 7);
}

}  // namespace
}  // namespace cg::train
