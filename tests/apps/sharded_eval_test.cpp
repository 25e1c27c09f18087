// Sharded evaluation counts every test image once: 3 ranks of cudagrad-train on a test set of 53
// images (not a multiple of 3) report the test loss and accuracy of one process, over 53 images.
// The runs take two steps first, with model.sync_batchnorm so that 3 ranks with a third of the
// batch each end with the one process's weights and running statistics (the union of their
// batches is its batch); padding the shards as training does would count one image twice.
#include <gtest/gtest.h>
#include <cmath>
#include <filesystem>
#include <string>

#include "support/metrics_file.h"
#include "support/paths.h"
#include "support/processes.h"

namespace cg {
namespace {
namespace fs = std::filesystem;

struct Eval {
  double loss = -1, accuracy = -1;
  int64_t images = -1;
  std::string log;
};

// data.synthetic_size=265: 265 training images, 53 test images (a fifth).
Eval run(const std::string& launcher, int batch_size, const std::string& tag) {
  const auto dir = test::make_temp_dir(tag);
  const std::string cmd = launcher + test::app("cudagrad-train") +
                          " data.dataset=synthetic data.synthetic_size=265 data.image_size=8 data.batch_size=" +
                          std::to_string(batch_size) +
                          " data.augment=false data.shuffle=false model.in_channels=3 model.widths=[4,8] "
                          "model.blocks=[1,1] model.sync_batchnorm=true train.epochs=1 train.max_steps=2 "
                          "train.eval_batch_size=8 train.device=cpu dist.timeout_s=30 output.dir=" +
                          (dir / "out").string();
  Eval e;
  const int rc = test::wait_for(test::start(cmd, dir / "log.txt"), std::chrono::seconds(240));
  e.log = test::read_text(dir / "log.txt");
  EXPECT_EQ(rc, 0) << e.log;
  const auto evals = test::metrics_records(dir / "out", "eval");
  if (evals.empty()) return e;
  e.loss = evals.back()["loss"].get<double>();
  e.accuracy = evals.back()["accuracy"].get<double>();
  e.images = evals.back()["images"].get<int64_t>();
  return e;
}

TEST(ShardedEvaluation, ThreeRanksCountEveryTestImageOnce) {
  const Eval single = run("", 24, "eval_one");
  ASSERT_EQ(single.images, 53) << single.log;
  const Eval three = run(test::app("cudagrad-launch") + " --standalone --nproc-per-node 3 ", 8, "eval_three");
  EXPECT_EQ(three.images, 53) << three.log;
  EXPECT_NE(three.log.find("of 53 images"), std::string::npos) << three.log;
  // The weights agree to float32 rounding (batch statistics summed in another order), so the
  // loss to 1e-5 relative; one image counted twice moves it by about 1/53.
  EXPECT_LT(std::abs(three.loss - single.loss) / single.loss, 1e-5) << three.log;
  EXPECT_DOUBLE_EQ(std::round(three.accuracy * 53), std::round(single.accuracy * 53)) << three.log;
  EXPECT_LT(std::abs(three.accuracy * 53 - std::round(three.accuracy * 53)), 1e-9) << "not a count of 53 images";
}

}  // namespace
}  // namespace cg
