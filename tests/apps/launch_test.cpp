// Data parallelism with real processes: cudagrad-launch with 2 and 3 ranks (and mpirun when it is
// installed) trains to identical replicas; killing a rank makes the launcher fail fast with no
// process left behind; a rank that never joins makes rendezvous fail when its timeout expires.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/free_port.h"
#include "support/paths.h"
#include "support/processes.h"

namespace cg {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

using test::find_rank;
using test::processes_with;
using test::start;
using test::wait_for;
std::string bin(const std::string& name) { return test::app(name); }
std::string read_file(const fs::path& p) { return test::read_text(p); }

std::string train_args(const fs::path& out, const std::string& extra = "") {
  return "data.dataset=synthetic data.synthetic_size=384 data.image_size=8 data.batch_size=16 "
         "model.in_channels=3 model.widths=[4,8] model.blocks=[1,1] train.epochs=2 train.log_interval=4 "
         "train.device=cpu dist.timeout_s=30 output.dir=" + out.string() + " " + extra;
}

int count_lines_with(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

class LaunchRanks : public ::testing::TestWithParam<int> {};

TEST_P(LaunchRanks, TrainsToIdenticalReplicas) {
  const int n = GetParam();
  const auto dir = test::make_temp_dir("launch");
  const pid_t pid = start(bin("cudagrad-launch") + " --standalone --nproc-per-node " + std::to_string(n) + " " +
                              bin("cudagrad-train") + " " + train_args(dir / "out", "train.grad_accum_steps=2"),
                          dir / "log.txt");
  const int rc = wait_for(pid, std::chrono::seconds(240));
  const std::string log = read_file(dir / "log.txt");
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("all " + std::to_string(n) + " replicas hold identical weights"), std::string::npos) << log;
  for (int r = 1; r < n; ++r)  // only rank 0 reports progress
    EXPECT_EQ(log.find("[rank " + std::to_string(r) + "] epoch"), std::string::npos) << log;
  const std::string metrics = read_file(dir / "out" / "metrics.jsonl");
  EXPECT_EQ(count_lines_with(metrics, "\"kind\":\"eval\""), 2) << metrics;  // one writer, not n

}

INSTANTIATE_TEST_SUITE_P(World, LaunchRanks, ::testing::Values(2, 3));

// profile.enabled writes a timeline in which some bucket's all-reduce starts while a backward pass
// is still running (a model big enough for backward to take a few milliseconds).
TEST(Launch, TimelineShowsAllReducesDuringBackward) {
  const auto dir = test::make_temp_dir("launch_trace");
  const pid_t pid = start(bin("cudagrad-launch") + " --standalone --nproc-per-node 2 " + bin("cudagrad-train") + " " +
                              train_args(dir / "out", "model.widths=[32,64] data.image_size=16 data.batch_size=32 "
                                                      "train.epochs=1 profile.enabled=true dist.bucket_cap_mb=0.01"),
                          dir / "log.txt");
  ASSERT_EQ(wait_for(pid, std::chrono::seconds(240)), 0) << read_file(dir / "log.txt");
  // Some bucket's all-reduce starts while a backward pass is still running.
  const auto trace = nlohmann::json::parse(read_file(dir / "out" / "trace_rank0.json"))["traceEvents"];
  std::vector<std::pair<double, double>> backward;
  std::vector<double> reduce_starts;
  for (const auto& e : trace) {
    if (e["ph"] != "X") continue;
    if (e["name"] == "backward") backward.emplace_back(e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>());
    if (e["cat"] == "communication") reduce_starts.push_back(e["ts"].get<double>());
  }
  ASSERT_FALSE(backward.empty());
  ASSERT_FALSE(reduce_starts.empty());
  int overlapping = 0;
  for (double t : reduce_starts)
    for (auto [b, e] : backward) overlapping += t > b && t < e;
  EXPECT_GT(overlapping, 0) << "no all-reduce started during a backward pass";
}


TEST(Launch, MpirunWorksToo) {
  if (std::system("command -v mpirun > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "needs mpirun (Debian's openmpi-bin)";
  const auto dir = test::make_temp_dir("mpirun");
  const std::string cmd = "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe -np 2 "
                          "-x MASTER_PORT=" + std::to_string(test::free_port()) + " " + bin("cudagrad-train") + " " +
                          train_args(dir / "out");
  const int rc = wait_for(start(cmd, dir / "log.txt"), std::chrono::seconds(240));
  const std::string log = read_file(dir / "log.txt");
  ASSERT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("all 2 replicas hold identical weights"), std::string::npos) << log;
  EXPECT_NE(log.find("Open MPI"), std::string::npos) << log;
}

TEST(Launch, KillingARankFailsFastAndLeavesNothingBehind) {
  const auto dir = test::make_temp_dir("launch_kill");
  const std::string marker = (dir / "out").string();
  const pid_t pid = start(bin("cudagrad-launch") + " --standalone --nproc-per-node 2 " + bin("cudagrad-train") + " " +
                              train_args(dir / "out", "train.epochs=1000"),
                          dir / "log.txt");
  // Wait until training is under way, then kill rank 1 the hard way.
  pid_t victim = -1;
  for (int i = 0; i < 600 && victim < 0; ++i) {
    if (read_file(dir / "log.txt").find("epoch 1 step") != std::string::npos) victim = find_rank(marker, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GT(victim, 0) << read_file(dir / "log.txt");
  kill(victim, SIGKILL);
  const auto t0 = Clock::now();
  const int rc = wait_for(pid, std::chrono::seconds(60));
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::string log = read_file(dir / "log.txt");
  EXPECT_NE(rc, 0) << log;
  EXPECT_NE(rc, -1) << "the launcher hung";
  EXPECT_LT(seconds, 30.0) << log;
  EXPECT_NE(log.find("rank 1 failed first"), std::string::npos) << log;
  EXPECT_EQ(processes_with(marker), 0) << "ranks left behind";
}

TEST(Launch, MaxRestartsResumesFromTheLatestCheckpoint) {
  const auto dir = test::make_temp_dir("launch_restart");
  const std::string marker = (dir / "out").string();
  const pid_t pid = start(bin("cudagrad-launch") + " --standalone --nproc-per-node 2 --max-restarts 1 " +
                              bin("cudagrad-train") + " " +
                              train_args(dir / "out", "data.synthetic_size=2048 train.epochs=6 checkpoint.save_every=1"),
                          dir / "log.txt");
  // Once the first epoch's checkpoint exists, kill rank 1: the group restarts and resumes.
  pid_t victim = -1;
  for (int i = 0; i < 1200 && victim < 0; ++i) {
    if (fs::exists(dir / "out" / "checkpoints" / "epoch_1.safetensors")) victim = find_rank(marker, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(victim, 0) << read_file(dir / "log.txt");
  kill(victim, SIGKILL);
  const int rc = wait_for(pid, std::chrono::seconds(240));
  const std::string log = read_file(dir / "log.txt");
  EXPECT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("restarting the group (1 of 1)"), std::string::npos) << log;
  EXPECT_NE(log.find("resumed from"), std::string::npos) << log;
  EXPECT_NE(log.find("all 2 replicas hold identical weights"), std::string::npos) << log;
}

TEST(Launch, ARankThatNeverJoinsTimesOut) {
  const auto dir = test::make_temp_dir("launch_join");
  const std::string env = "env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                          std::to_string(test::free_port());
  const auto t0 = Clock::now();
  const int rc = wait_for(start(env + " " + bin("cudagrad-train") + " " + train_args(dir / "out", "dist.timeout_s=2"),
                                dir / "log.txt"),
                          std::chrono::seconds(60));
  const std::string log = read_file(dir / "log.txt");
  EXPECT_EQ(rc, 1) << log;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 20.0);
  EXPECT_NE(log.find("timed out"), std::string::npos) << log;
}

}  // namespace
}  // namespace cg
