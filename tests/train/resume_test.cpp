// Resume: a run interrupted mid-epoch and resumed from its checkpoint ends with weights that are
// bit-identical to an uninterrupted run (CPU, same thread count), with gradient accumulation,
// shuffling, augmentation and a warm-up schedule all in play. Bit-identity alone would also hold
// for a trainer that ignored the checkpoint and trained from step 0, so metrics.jsonl must show
// the resume itself: one "resume" record at the interrupted step, training going on after it.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "train/trainer.h"
#include "support/metrics_file.h"
#include "support/paths.h"
#include "util/check.h"
#include "util/safetensors.h"

namespace cg::train {
namespace {

std::vector<std::string> base_overrides(const std::string& out, int64_t accum) {
  return {"data.dataset=synthetic", "data.synthetic_size=192", "data.image_size=8",
          "data.batch_size=16", "data.num_workers=2", "data.augment=true", "data.shuffle=true",
          "model.in_channels=3", "model.widths=[4,8]", "model.blocks=[1,1]",
          "optim.name=sgd", "optim.lr=0.05", "optim.momentum=0.9", "optim.nesterov=true",
          "sched.name=warmup_cosine", "sched.warmup_steps=3", "train.epochs=2",
          "train.threads=2", "train.log_interval=4", "train.eval_batch_size=64",
          "train.device=cpu", "train.grad_accum_steps=" + std::to_string(accum),
          "output.dir=" + out};
}

TrainResult run(std::vector<std::string> overrides) {
  TrainConfig c = load_train_config("", overrides);
  return train(c, to_yaml(c));
}

void expect_same_model(const std::string& a_path, const std::string& b_path) {
  const safetensors::File a = safetensors::load(a_path), b = safetensors::load(b_path);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, ra] : a.tensors) {
    const safetensors::TensorRecord* rb = b.find(name);
    ASSERT_NE(rb, nullptr) << name;
    EXPECT_EQ(ra.shape, rb->shape) << name;
    EXPECT_TRUE(ra.bytes == rb->bytes) << name << " differs";
  }
}

// `out_dir`'s metrics.jsonl holds the first run's records, then one resume from `checkpoint` at
// `step`, then training from there on (the next log window ends within train.log_interval=4).
void expect_resumed_at(const std::filesystem::path& out_dir, const std::string& checkpoint, int64_t step) {
  const std::vector<test::Resumption> r = test::resumptions(out_dir);
  ASSERT_EQ(r.size(), 1u) << "expected exactly one resume record in " << out_dir / "metrics.jsonl";
  EXPECT_EQ(r[0].from, checkpoint);
  EXPECT_EQ(r[0].step, step) << "resumed at another step than the checkpoint's";
  EXPECT_GT(r[0].first_train_step, step) << "training after the resume did not go on from its step";
  EXPECT_LE(r[0].first_train_step, step + 4);
  const auto before = test::metrics_records(out_dir, "train");
  ASSERT_FALSE(before.empty());
  EXPECT_LE(before.front()["step"].get<int64_t>(), step) << "the interrupted run's records were lost";
}

void check_resume(int64_t accum, int64_t stop_step) {
  auto dir = test::make_temp_dir("resume");
  const TrainResult full = run(base_overrides((dir / "full").string(), accum));

  auto first = base_overrides((dir / "part").string(), accum);
  first.push_back("train.max_steps=" + std::to_string(stop_step));
  const TrainResult part = run(first);
  ASSERT_EQ(part.steps, stop_step);

  auto second = base_overrides((dir / "part").string(), accum);
  second.push_back("checkpoint.resume_from=" + part.checkpoint);
  const TrainResult resumed = run(second);
  EXPECT_EQ(resumed.steps, full.steps);
  expect_resumed_at(dir / "part", part.checkpoint, stop_step);
  expect_same_model(full.checkpoint, resumed.checkpoint);
  EXPECT_EQ(resumed.test_accuracy, full.test_accuracy);
}

TEST(Resume, MidEpochInterruptionIsBitExact) { check_resume(1, 5); }
TEST(Resume, WithGradientAccumulation) { check_resume(2, 7); }

TEST(Resume, RejectsACorruptCheckpoint) {
  auto dir = test::make_temp_dir("resume_bad");
  const std::string bad = (dir / "bad.safetensors").string();
  { std::ofstream(bad) << "definitely not a checkpoint"; }
  auto o = base_overrides((dir / "out").string(), 1);
  o.push_back("checkpoint.resume_from=" + bad);
  try {
    run(o);
    FAIL() << "a corrupt checkpoint was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cg::train
