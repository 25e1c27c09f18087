// model.sync_batchnorm through the real programs: 2 ranks of cudagrad-train (under cudagrad-launch,
// and under mpirun when it is installed) with half the batch each train like one process on the
// whole batch: the same loss at every step (metrics.jsonl sums the loss over ranks), the same test
// loss at the end, identical replicas. Without the key the same 2 ranks normalize with half
// batches and their losses leave the one-process run's at once, which is how the comparison
// proves it sees the collective. The timeline names the SyncBatchNorm collectives.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "support/free_port.h"
#include "support/metrics_file.h"
#include "support/paths.h"
#include "support/processes.h"
#include "support/need_tool.h"

namespace cg {
namespace {
namespace fs = std::filesystem;

// Tiny MiniResNet (6 batch-norm layers) on synthetic 8x8 images, no augmentation or shuffling,
// so rank r's batch is images r, r + 2, ... of the one-process batch (DistributedSampler's split).
// 52 test images: an even split, so sharded evaluation counts no image twice.
std::string train_args(const fs::path& out, int batch_size, const std::string& extra) {
  return "data.dataset=synthetic data.synthetic_size=260 data.image_size=8 data.batch_size=" +
         std::to_string(batch_size) + " data.augment=false data.shuffle=false model.in_channels=3 "
         "model.widths=[4,8] model.blocks=[1,1] train.epochs=1 train.max_steps=6 train.log_interval=1 "
         "train.device=cpu dist.timeout_s=30 output.dir=" + out.string() + " " + extra;
}

struct TrainRun {
  std::string log;
  std::vector<double> train_losses;  // one per step
  double test_loss = -1;
};

TrainRun run(const std::string& cmd, const fs::path& dir) {
  TrainRun r;
  const int rc = test::wait_for(test::start(cmd, dir / "log.txt"), std::chrono::seconds(240));
  r.log = test::read_text(dir / "log.txt");
  EXPECT_EQ(rc, 0) << r.log;
  for (const auto& j : test::metrics_records(dir / "out", "train")) r.train_losses.push_back(j["loss"].get<double>());
  for (const auto& j : test::metrics_records(dir / "out", "eval")) r.test_loss = j["loss"].get<double>();
  return r;
}

TrainRun one_process(const std::string& tag) {
  const auto dir = test::make_temp_dir(tag);
  // model.sync_batchnorm=true with one process: accepted, and nothing to synchronize.
  return run(test::app("cudagrad-train") + " " + train_args(dir / "out", 16, "model.sync_batchnorm=true"), dir);
}

TrainRun launched(const std::string& tag, const std::string& extra) {
  const auto dir = test::make_temp_dir(tag);
  return run(test::app("cudagrad-launch") + " --standalone --nproc-per-node 2 " + test::app("cudagrad-train") + " " +
                 train_args(dir / "out", 8, extra),
             dir);
}

// The largest |a - b| / max(|b|, 1e-3) over the steps; infinity when the step counts differ.
double worst_relative(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.empty()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), 1e-3));
  return worst;
}

// float32 activations, batch statistics summed in a different order: 1e-4 relative over 6 steps
// (measured: 5e-8; without SyncBatchNorm the ranks are off by about 7e-3).
constexpr double kTolerance = 1e-4;

TEST(SyncBatchNormTraining, TwoLaunchedRanksTrainLikeOneProcessOnTheUnionBatch) {
  const TrainRun single = one_process("syncbn_one");
  ASSERT_EQ(single.train_losses.size(), 6u) << single.log;
  EXPECT_EQ(single.log.find("SyncBatchNorm:"), std::string::npos) << "one process has nothing to sync\n"
                                                                   << single.log;

  const auto dir = test::make_temp_dir("syncbn_two");
  const TrainRun synced = run(test::app("cudagrad-launch") + " --standalone --nproc-per-node 2 " +
                             test::app("cudagrad-train") + " " +
                             train_args(dir / "out", 8, "model.sync_batchnorm=true profile.enabled=true"),
                         dir);
  EXPECT_NE(synced.log.find("SyncBatchNorm: 6 batch-norm layers, statistics over 2 ranks"), std::string::npos)
      << synced.log;
  EXPECT_NE(synced.log.find("all 2 replicas hold identical weights"), std::string::npos) << synced.log;
  const double worst = worst_relative(synced.train_losses, single.train_losses);
  std::printf("2 synced ranks vs one process: worst relative loss difference %.3g\n", worst);
  EXPECT_LT(worst, kTolerance) << synced.log;
  EXPECT_LT(std::abs(synced.test_loss - single.test_loss) / single.test_loss, kTolerance) << synced.log;

  // The timeline names the collectives: one per layer and direction per step.
  const auto trace = nlohmann::json::parse(test::read_text(dir / "out" / "trace_rank0.json"))["traceEvents"];
  int forward = 0, backward = 0;
  for (const auto& e : trace) {
    const std::string name = e.value("name", "");
    forward += name.rfind("SyncBatchNorm forward layer1.0.bn1", 0) == 0;
    backward += name.rfind("SyncBatchNorm backward layer1.0.bn1", 0) == 0;
  }
  EXPECT_EQ(forward, 6);
  EXPECT_EQ(backward, 6);

  const TrainRun unsynced = launched("syncbn_off", "");
  const double apart = worst_relative(unsynced.train_losses, single.train_losses);
  std::printf("2 ranks without SyncBatchNorm vs one process: worst relative loss difference %.3g\n", apart);
  EXPECT_GT(apart, 10 * kTolerance)
      << "without SyncBatchNorm the half batches should not match the whole batch";
}

TEST(SyncBatchNormTraining, MpirunRanksTrainLikeOneProcessOnTheUnionBatch) {
  NEED_TOOL(test::missing_command("mpirun", "Debian's openmpi-bin"));
  const TrainRun single = one_process("syncbn_mpi_one");
  const auto dir = test::make_temp_dir("syncbn_mpirun");
  const TrainRun synced = run("env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np 2 "
                         "-x MASTER_PORT=" + std::to_string(test::free_port()) + " " + test::app("cudagrad-train") +
                             " " + train_args(dir / "out", 8, "model.sync_batchnorm=true"),
                         dir);
  EXPECT_NE(synced.log.find("Open MPI"), std::string::npos) << synced.log;
  EXPECT_NE(synced.log.find("all 2 replicas hold identical weights"), std::string::npos) << synced.log;
  EXPECT_LT(worst_relative(synced.train_losses, single.train_losses), kTolerance) << synced.log;
}

}  // namespace
}  // namespace cg
