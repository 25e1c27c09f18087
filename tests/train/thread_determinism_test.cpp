// Training on the CPU does not depend on the number of compute threads: the same run with
// train.threads=1, 2 and 3 ends with the same checkpoint, every tensor (weights, batch-norm
// statistics, optimizer state) and every counter bit-identical. So a result can be reproduced on a
// machine with another core count, and a parallel loop whose reduction order follows the thread
// count (per-thread partial sums added at the end) fails here. 3 threads on 2 cores: uneven
// shares of every loop, the case a partition bug shows in.
#include <gtest/gtest.h>

#include <omp.h>

#include <regex>

#include "train/trainer.h"
#include "support/paths.h"
#include "util/safetensors.h"

namespace cg::train {
namespace {

// Widths [8,32] on 8x8 images take every CPU convolution of kernels.cpu_conv=auto: direct (every
// 3x3, stride 1 and 2) and im2col (the 1x1 downsample). Winograd, which auto no longer runs, has
// its own thread-count test (tests/kernels/cpu_conv/winograd_test.cpp).
std::vector<std::string> tiny_run(const std::string& optimizer, int64_t threads, const std::string& out) {
  return {"data.dataset=synthetic", "data.synthetic_size=128", "data.image_size=8", "data.batch_size=16",
          "data.num_workers=2", "data.augment=true", "data.shuffle=true", "model.in_channels=3",
          "model.widths=[8,32]", "model.blocks=[1,1]", "optim.name=" + optimizer, "optim.lr=0.05",
          "optim.momentum=0.9", "optim.nesterov=" + std::string(optimizer == "sgd" ? "true" : "false"),
          "sched.name=warmup_cosine", "sched.warmup_steps=3", "train.epochs=2", "train.grad_accum_steps=2",
          "train.log_interval=4", "train.eval_batch_size=48", "train.device=cpu",
          "train.threads=" + std::to_string(threads), "output.dir=" + out};
}

// The config in a checkpoint, less the two lines that differ by design between the runs.
std::string config_but_threads_and_output(const std::string& yaml) {
  return std::regex_replace(yaml, std::regex("\\n *(threads|dir): [^\\n]*"), "");
}

void expect_identical_checkpoints(const std::string& a_path, const std::string& b_path, const std::string& what) {
  const safetensors::File a = safetensors::load(a_path), b = safetensors::load(b_path);
  ASSERT_EQ(a.tensors.size(), b.tensors.size()) << what;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& [name, ra] = a.tensors[i];
    EXPECT_EQ(name, b.tensors[i].first) << what;
    EXPECT_EQ(ra.shape, b.tensors[i].second.shape) << what << ": " << name;
    EXPECT_TRUE(ra.bytes == b.tensors[i].second.bytes) << what << ": " << name << " differs";
  }
  ASSERT_EQ(a.metadata.size(), b.metadata.size()) << what;
  for (const auto& [key, value] : a.metadata) {
    if (key == safetensors::kChecksumKey) continue;  // covers the config text, which names the threads
    ASSERT_TRUE(b.metadata.count(key)) << what << ": " << key;
    if (value.find("threads: ") != std::string::npos)  // the resolved config
      EXPECT_EQ(config_but_threads_and_output(value), config_but_threads_and_output(b.metadata.at(key))) << what;
    else
      EXPECT_EQ(value, b.metadata.at(key)) << what << ": " << key;
  }
}

TEST(ThreadDeterminism, OneTwoAndThreeThreadsTrainBitIdenticalCheckpoints) {
  const int omp_threads = omp_get_max_threads();  // train() sets it; give it back to the other tests
  for (const std::string optimizer : {"sgd", "adamw"}) {
    const auto dir = test::make_temp_dir("thread_determinism_" + optimizer);
    std::vector<TrainResult> results;
    for (int64_t threads : {1, 2, 3}) {
      const TrainConfig c =
          load_train_config("", tiny_run(optimizer, threads, (dir / ("threads" + std::to_string(threads))).string()));
      results.push_back(train(c, to_yaml(c)));
    }
    for (size_t i = 1; i < results.size(); ++i) {
      const std::string what = optimizer + ", " + std::to_string(i + 1) + " threads against 1";
      EXPECT_EQ(results[i].steps, results[0].steps) << what;
      EXPECT_EQ(results[i].test_loss, results[0].test_loss) << what;  // exactly: the same bits
      EXPECT_EQ(results[i].test_accuracy, results[0].test_accuracy) << what;
      expect_identical_checkpoints(results[0].checkpoint, results[i].checkpoint, what);
    }
  }
  omp_set_num_threads(omp_threads);
}

}  // namespace
}  // namespace cg::train
