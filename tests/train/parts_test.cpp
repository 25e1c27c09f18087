// TrainingParts (train/parts.h) are whole from construction: the step runs without a second stage,
// and a checkpoint to resume from is loaded by the constructor itself, into the model, the
// optimizer and the generator, before the step that uses them is built. A resumed run's parts then
// train on exactly as the run that wrote the checkpoint does.
#include <gtest/gtest.h>

#include <vector>

#include "support/paths.h"
#include "support/tiny_batches.h"
#include "train/parts.h"

namespace cg::train {
namespace {

constexpr double kLr = 0.05;

TrainConfig config() {
  return load_train_config("", {"train.device=cpu", "train.threads=1", "model.in_channels=2", "model.widths=[4,8]",
                                "model.blocks=[1,1]", "optim.name=sgd", "optim.momentum=0.9"});
}

data::DeviceBatch batch(int64_t i) { return {test::union_images(4 * i, 4), test::union_labels(4 * i, 4), 4}; }

std::vector<std::vector<float>> weights(nn::Module& model) {
  std::vector<std::vector<float>> out;
  for (const auto& [name, p] : model.named_parameters()) out.push_back(p.to_vector<float>());
  return out;
}

TEST(TrainingParts, AFreshStartCanStepAtOnceAndResumedNothing) {
  const TrainConfig c = config();
  DistContext dist(c.dist.timeout_s);
  TrainingParts parts(c, dist);
  EXPECT_FALSE(parts.resumed().has_value());
  EXPECT_EQ(parts.resumed_from(), "");
  EXPECT_EQ(parts.ddp(), nullptr) << "one process: nothing to communicate";
  const auto initial = weights(parts.model());
  parts.step().run_micro_step(batch(0), {.lr = kLr});
  EXPECT_EQ(parts.optimizer().steps_taken(), 1);
  EXPECT_NE(weights(parts.model()), initial);
}

TEST(TrainingParts, ACheckpointIsLoadedBeforeTheFirstStepAndTrainingGoesOnAsIfUninterrupted) {
  const TrainConfig c = config();
  DistContext dist(c.dist.timeout_s);
  TrainingParts writer(c, dist);
  for (int64_t i = 0; i < 2; ++i) writer.step().run_micro_step(batch(i), {.lr = kLr});
  (void)writer.generator().engine()();  // the generator's state moves on, and must be restored
  nn::TrainingProgress saved{.epoch = 1, .batch_in_epoch = 2, .step = 2, .optimizer = "sgd",
                             .rng_state = writer.generator().state()};
  const std::string path = (test::make_temp_dir("parts_resume") / "ckpt.safetensors").string();
  nn::save_checkpoint(path, writer.model(), writer.optimizer(), saved);

  TrainingParts resumed(c, dist, path);
  ASSERT_TRUE(resumed.resumed().has_value());
  EXPECT_EQ(resumed.resumed_from(), path);
  EXPECT_EQ(resumed.resumed()->step, 2);
  EXPECT_EQ(resumed.resumed()->batch_in_epoch, 2);
  EXPECT_EQ(weights(resumed.model()), weights(writer.model()));
  EXPECT_EQ(resumed.optimizer().steps_taken(), 2);
  EXPECT_EQ(resumed.generator().state(), writer.generator().state());
  // The momentum buffers came along too: the next step lands on the same weights, bit for bit.
  writer.step().run_micro_step(batch(2), {.lr = kLr});
  resumed.step().run_micro_step(batch(2), {.lr = kLr});
  EXPECT_EQ(weights(resumed.model()), weights(writer.model()));
}

}  // namespace
}  // namespace cg::train
