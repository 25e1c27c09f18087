// Issue 37 item 4: what one training step of the default GPU configuration asks of the device,
// counted by the emulated GPU (cg_emu/counters.h): kernels launched, and host waits, which must be
// none: a step that waits for the device stalls the CPU's run-ahead and, with several ranks, each
// rank's. The count is printed, the bound on waits asserted. Emulated GPU only (a real GPU has no
// such counters here; CUPTI would be the way), skips elsewhere saying so.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "data/resident_feeder.h"
#include "data/synthetic.h"
#include "kernels/backend.h"
#include "support/need_gpu.h"
#include "support/paths.h"
#include "train/parts.h"

#ifdef CUDAGRAD_GPU_EMULATION
#include "cg_emu/counters.h"
#endif

namespace cg::train {
namespace {

TrainConfig default_config(const std::vector<std::string>& extra) {
  std::vector<std::string> overrides = {"model.widths=[8,16]", "model.blocks=[1,1]", "data.batch_size=16",
                                        "data.dataset=synthetic", "kernels.conv=native"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return load_train_config((test::source_dir() / "configs" / "fashion_mnist.yaml").string(), overrides);
}

struct StepWork {
  uint64_t kernels = 0, host_waits = 0;
  std::map<std::string, uint64_t> by_name;  // the step's kernels
};

void print(const char* what, const StepWork& w) {
  std::printf("default GPU config, %s: %llu kernels, %llu host waits\n", what, (unsigned long long)w.kernels,
              (unsigned long long)w.host_waits);
  for (const auto& [name, count] : w.by_name) std::printf("  %4llu  %s\n", (unsigned long long)count, name.c_str());
}

// Trains `steps` steps of configs/fashion_mnist.yaml (narrowed, synthetic images) as the trainer's
// loop does (the resident feeder's next batch, then the step), and counts the last one.
StepWork last_step_work(const std::vector<std::string>& extra, int steps) {
#ifdef CUDAGRAD_GPU_EMULATION
  const TrainConfig c = default_config(extra);
  DistContext dist(c.dist.timeout_s);
  TrainingParts parts(c, dist);
  const data::SyntheticDataset ds({.size = 256, .channels = 1, .image_size = 28});  // 16 batches: no epoch ends
  data::DistributedSampler sampler(ds.size(), 0, 1, {.shuffle = true, .seed = 5, .drop_last = true});
  data::LoaderOptions lo;
  lo.batch_size = c.data.batch_size;
  lo.augment.enabled = c.data.augment;
  lo.seed = uint64_t(c.train.seed);
  data::ResidentFeeder feeder(ds, sampler, lo, parts.device(), parts.compute());
  feeder.start_epoch(0, 0);
  cg_emu::Counters before;
  std::map<std::string, uint64_t> names_before;
  for (int s = 0; s < steps; ++s) {
    if (s == steps - 1) {
      before = cg_emu::counters();
      names_before = cg_emu::kernels_by_name();
    }
    const auto batch = feeder.next();
    parts.step().run_micro_step(*batch, {.lr = 0.1});
  }
  const cg_emu::Counters after = cg_emu::counters();
  StepWork w{after.kernels - before.kernels, after.host_waits - before.host_waits, {}};
  for (const auto& [name, count] : cg_emu::kernels_by_name())
    if (count > names_before[name]) w.by_name[name] = count - names_before[name];
  parts.compute().synchronize();
  return w;
#else
  (void)extra;
  (void)steps;
  return {};
#endif
}

class StepWorkCount : public ::testing::Test {
 protected:
  void SetUp() override {
    NEED_GPU();
    if (!kernels::kGpuEmulation) GTEST_SKIP() << "counts come from the emulated GPU's runtime; this is a real GPU";
  }
};

TEST_F(StepWorkCount, AnEagerStepWaitsForTheDeviceNowhere) {
  const StepWork w = last_step_work({"train.cuda_graph=false"}, 4);
  print("eager step", w);
  EXPECT_GT(w.kernels, 0u);
  EXPECT_EQ(w.host_waits, 0u) << "the step blocks the host on the device";
}

// Issue 37 item 1: the narrowed model's six channels-last batch norms launch two kernels a
// direction (a reduction whose last block finishes it, then the elementwise pass): 24 a step,
// 36 when each reduction had its own finalize kernel.
TEST_F(StepWorkCount, BatchNormLaunchesTwoKernelsADirection) {
  const StepWork w = last_step_work({"train.cuda_graph=false"}, 4);
  uint64_t batch_norm = 0;
  for (const auto& [name, count] : w.by_name)
    if (name.rfind("batch_norm", 0) == 0) batch_norm += count;
  EXPECT_EQ(batch_norm, 6u * 2 * 2);
}

TEST_F(StepWorkCount, AGraphedStepIsOneReplayAndWaitsNowhere) {
  const StepWork w = last_step_work({"train.cuda_graph=true"}, 6);  // 3 eager steps, the capture, replays
  print("graphed step (kernels outside the graph)", w);
  EXPECT_EQ(w.host_waits, 0u) << "the step blocks the host on the device";
}

}  // namespace
}  // namespace cg::train
