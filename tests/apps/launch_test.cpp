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
#include <tuple>
#include <vector>

#include "support/free_port.h"
#include "support/launcher_restarts.h"
#include "support/metrics_file.h"
#include "support/paths.h"
#include "support/processes.h"
#include "support/need_tool.h"

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

// Runs `args` (shell words) through the launcher; returns the exit code and the output.
std::pair<int, std::string> launch(const std::string& args, const std::string& tag, int limit_s = 60) {
  const auto dir = test::make_temp_dir(tag);
  const int rc = wait_for(start(bin("cudagrad-launch") + " " + args, dir / "log.txt"), std::chrono::seconds(limit_s));
  return {rc, read_file(dir / "log.txt")};
}

// What each rank printed, in order, without the "[rank r] " prefix.
std::vector<std::string> lines_of_rank(const std::string& log, int rank) {
  std::vector<std::string> lines;
  const std::string prefix = "[rank " + std::to_string(rank) + "] ";
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) lines.push_back(line.substr(prefix.size()));
  return lines;
}

// The program's arguments reach it exactly and in order, whatever they look like: options with
// separate or attached values, `--`, the launcher's own option names, values with spaces. printf
// shows each argument it got between < and >.
TEST(Launch, PassesTheProgramsArgumentsThroughExactly) {
  const std::vector<std::string> expected{"<--config>", "<configs/x.yaml>", "<--config=y.yaml>", "<-->",
                                          "<a key=with spaces>", "<--nproc-per-node>", "<3>", "<-h>", "<x=1>"};
  const std::string program_args = "--config configs/x.yaml --config=y.yaml -- 'a key=with spaces' --nproc-per-node 3 -h x=1";
  for (const std::string& launcher : {std::string("--nproc-per-node 2"), std::string("--nproc-per-node=2 --standalone"),
                                      std::string("--nproc-per-node 2 --"), std::string("--nproc_per_node 2 --max-restarts 0")}) {
    const auto [rc, log] = launch(launcher + " printf '<%s>\\n' " + program_args, "launch_args");
    ASSERT_EQ(rc, 0) << launcher << "\n" << log;
    for (int rank = 0; rank < 2; ++rank)
      EXPECT_EQ(lines_of_rank(log, rank), expected) << launcher << "\n" << log;
    EXPECT_TRUE(lines_of_rank(log, 2).empty()) << "the program's --nproc-per-node 3 reached the launcher\n" << log;
  }
}

TEST(Launch, ItsOwnErrorsExitTwoAndNameTheCause) {
  struct Case {
    std::string args, expected;  // launcher arguments; what the output must hold
    int rc;
  };
  const std::string src = test::source_dir().string(), readme = (test::source_dir() / "README.md").string();
  const Case cases[] = {
      {"--nproc-per-node 2", "PROGRAM", 2},
      {"--nproc-per-node two printf x", "--nproc-per-node", 2},
      {"--bogus 1 printf x", "--bogus", 2},
      {"--nnodes 2 --node-rank 2 printf x", "--node-rank", 2},
      {"--nproc-per-node 0 printf x", "--nproc-per-node: must be in [1, 1024], got 0", 2},
      // A program that cannot run is one error before any rank starts, not one per rank.
      {"--standalone --nproc-per-node 2 no_such_program_xyz --flag", "cannot run no_such_program_xyz: not found", 2},
      {"--standalone --nproc-per-node 2 /nonexistent/prog", "cannot run /nonexistent/prog: no such file", 2},
      {"--standalone --nproc-per-node 2 " + src, "cannot run " + src + ": " + src + " is a directory", 2},
      {"--standalone --nproc-per-node 2 " + readme, "cannot run " + readme + ": " + readme + " is not executable", 2},
      {"--standalone --nproc-per-node 2 cudagrad-train", "give its path: build/apps/cudagrad-train", 2},
      // The program's own failure: the launcher fails, naming the rank and the program's exit code.
      // Only rank 0 fails (rank 1 waits to be stopped), so which rank failed first is not a race.
      {"--standalone --nproc-per-node 2 sh -c 'if [ \"$RANK\" = 0 ]; then exit 3; fi; sleep 30'",
       "rank 0 failed first (exit code 3)", 1},
      {"--help", "--nproc-per-node", 0},
  };
  for (const Case& c : cases) {
    const auto [rc, log] = launch(c.args, "launch_errors");
    EXPECT_EQ(rc, c.rc) << c.args << "\n" << log;
    EXPECT_NE(log.find(c.expected), std::string::npos) << c.args << "\n" << log;
    if (c.rc == 2 && c.args.rfind("--standalone", 0) == 0) {  // a program that cannot run
      EXPECT_EQ(count_lines_with(log, "cudagrad-launch: error: cannot run"), 1) << log;
      EXPECT_EQ(log.find("[rank "), std::string::npos) << "a rank was started\n" << log;
    }
  }
  const auto [rc, log] = launch("--version", "launch_version");
  EXPECT_EQ(rc, 0) << log;
  EXPECT_EQ(log.rfind("cudagrad ", 0), 0u) << log;
}

bool have_fashion_mnist() { return fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"); }

// The README's command as a user types it (binaries by their build paths, the config relative
// to the source tree), with a step cap and an output folder appended; then the other spellings of
// the program's options: --config=FILE and a quoted value with a space.
TEST(Launch, TheReadmeCommandTrainsFashionMnistOnTwoRanks) {
  NEED_TOOL(have_fashion_mnist() ? "" : "needs Debian's dataset-fashion-mnist");
  const auto dir = test::make_temp_dir("launch_readme");
  const std::string cd = "cd " + test::source_dir().string() + " && exec ";
  const std::string cap = " train.max_steps=3 train.threads=1 data.num_workers=1";
  pid_t pid = start("sh -c '" + cd + bin("cudagrad-launch") + " --standalone --nproc-per-node 2 " + bin("cudagrad-train") +
                        " --config configs/fashion_mnist_cpu.yaml" + cap + " output.dir=" + (dir / "out").string() + "'",
                    dir / "log.txt");
  std::string log = read_file(dir / "log.txt");
  ASSERT_EQ(wait_for(pid, std::chrono::seconds(300)), 0) << read_file(dir / "log.txt");
  log = read_file(dir / "log.txt");
  EXPECT_NE(log.find("all 2 replicas hold identical weights"), std::string::npos) << log;
  EXPECT_NE(read_file(dir / "out" / "metrics.jsonl").find("\"kind\":\"eval\""), std::string::npos);

  const fs::path spaced = dir / "out with space";
  pid = start(bin("cudagrad-launch") + " --standalone --nproc-per-node 2 -- " + bin("cudagrad-train") +
                  " --config=" + (test::source_dir() / "configs" / "fashion_mnist_cpu.yaml").string() + cap +
                  " \"output.dir=" + spaced.string() + "\"",
              dir / "log2.txt");
  ASSERT_EQ(wait_for(pid, std::chrono::seconds(300)), 0) << read_file(dir / "log2.txt");
  EXPECT_TRUE(fs::exists(spaced / "metrics.jsonl")) << read_file(dir / "log2.txt");
}

// Two launchers, as on two machines, with --nnodes 2 and their own --node-rank, rendezvous at
// 127.0.0.1 and train one model together.
TEST(Launch, TwoNodesOnOneMachineTrainTogether) {
  const auto dir = test::make_temp_dir("launch_nodes");
  const std::string common = " --nnodes 2 --nproc-per-node 1 --master-addr 127.0.0.1 --master-port " +
                             std::to_string(test::free_port()) + " " + bin("cudagrad-train") + " " +
                             train_args(dir / "out", "train.max_steps=6");
  const pid_t node0 = start(bin("cudagrad-launch") + " --node-rank 0" + common, dir / "node0.txt");
  const pid_t node1 = start(bin("cudagrad-launch") + " --node-rank 1" + common, dir / "node1.txt");
  const int rc0 = wait_for(node0, std::chrono::seconds(240)), rc1 = wait_for(node1, std::chrono::seconds(60));
  const std::string log0 = read_file(dir / "node0.txt"), log1 = read_file(dir / "node1.txt");
  ASSERT_EQ(rc0, 0) << log0 << log1;
  ASSERT_EQ(rc1, 0) << log0 << log1;
  EXPECT_NE(log0.find("distributed: 2 ranks"), std::string::npos) << log0;
  EXPECT_NE(log0.find("all 2 replicas hold identical weights"), std::string::npos) << log0;
  EXPECT_TRUE(lines_of_rank(log1, 0).empty()) << "node 1 runs rank 1 only\n" << log1;  // which logs nothing
}

// Two processes with the variables srun gives its tasks (and an exported MASTER_PORT, as a batch
// script would) train together as under mpirun.
TEST(Launch, SlurmVariablesDriveTheTrainer) {
  const auto dir = test::make_temp_dir("slurm");
  const std::string port = std::to_string(test::free_port());
  std::vector<pid_t> tasks;
  for (int r = 0; r < 2; ++r) {
    const std::string env = "env -u RANK -u WORLD_SIZE -u LOCAL_RANK SLURM_JOB_ID=4242 SLURM_PROCID=" + std::to_string(r) +
                            " SLURM_LOCALID=" + std::to_string(r) + " SLURM_NTASKS=2 SLURM_NODEID=0 SLURM_NNODES=1 "
                            "SLURM_STEP_NUM_NODES=1 SLURM_STEP_TASKS_PER_NODE=2 SLURM_STEP_NODELIST=localhost "
                            "MASTER_PORT=" + port + " ";
    tasks.push_back(start(env + bin("cudagrad-train") + " " + train_args(dir / "out", "train.max_steps=6"),
                          dir / ("task" + std::to_string(r) + ".txt")));
  }
  const int rc0 = wait_for(tasks[0], std::chrono::seconds(240)), rc1 = wait_for(tasks[1], std::chrono::seconds(60));
  const std::string log0 = read_file(dir / "task0.txt"), log1 = read_file(dir / "task1.txt");
  ASSERT_EQ(rc0, 0) << log0 << log1;
  ASSERT_EQ(rc1, 0) << log0 << log1;
  EXPECT_NE(log0.find("2 ranks (Slurm)"), std::string::npos) << log0;
  EXPECT_NE(log0.find("all 2 replicas hold identical weights"), std::string::npos) << log0;
}

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
  NEED_TOOL(test::missing_command("mpirun", "Debian's openmpi-bin"));
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
  const std::string newest = test::newest_checkpoint_at_restart(dir / "log.txt", dir / "out" / "checkpoints", 1);
  const int rc = wait_for(pid, std::chrono::seconds(240));
  const std::string log = read_file(dir / "log.txt");
  EXPECT_EQ(rc, 0) << log;
  EXPECT_NE(log.find("restarting the group (1 of 1)"), std::string::npos) << log;
  EXPECT_NE(log.find("resumed from"), std::string::npos) << log;
  // The restarted group resumed from the newest checkpoint there was, at its step, and went on.
  ASSERT_FALSE(newest.empty()) << log;
  const std::vector<test::Resumption> r = test::resumptions(dir / "out");
  ASSERT_EQ(r.size(), 1u) << "no resume record in metrics.jsonl\n" << log;
  EXPECT_EQ(r[0].from, newest);
  EXPECT_EQ(r[0].step, test::step_of(newest));
  EXPECT_GT(r[0].first_train_step, r[0].step);
  EXPECT_NE(log.find("all 2 replicas hold identical weights"), std::string::npos) << log;
}

// Issue 38: nodes that share no disk. Node 1 runs in a mount namespace of its own with a private
// tmpfs where the output folder is, holding checkpoints of an earlier, unrelated job under every
// name the trainer writes (newer on disk than anything node 0 writes later). Rank 1 is killed
// once node 0 has a checkpoint; both launchers restart their group. Node 1's stale files must not
// win: every rank resumes from rank 0's newest checkpoint (rank 1 receives it over the process
// group), the resumed states compare equal, and the run finishes with identical replicas.
TEST(Launch, NodesWithoutASharedDiskResumeFromRankZerosCheckpoint) {
  NEED_TOOL(::geteuid() == 0 ? "" : "needs root (a mount namespace with a private tmpfs for node 1)");
  const auto dir = test::make_temp_dir("launch_unshared");
  const fs::path out = dir / "out";
  // The earlier job: another seed, one short epoch.
  ASSERT_EQ(wait_for(start(bin("cudagrad-train") + " " + train_args(dir / "stale", "train.seed=7 train.epochs=1"),
                           dir / "stale.txt"),
                     std::chrono::seconds(120)),
            0)
      << read_file(dir / "stale.txt");
  const std::string stale = (dir / "stale" / "checkpoints" / "last.safetensors").string();
  const std::string port = std::to_string(test::free_port());
  const std::string common = " --nnodes 2 --nproc-per-node 1 --max-restarts 1 --master-addr 127.0.0.1 --master-port " +
                             port + " " + bin("cudagrad-train") + " " +
                             train_args(out, "data.synthetic_size=2048 train.epochs=6 checkpoint.save_every=1");
  const pid_t node0 = start(bin("cudagrad-launch") + " --node-rank 0" + common, dir / "node0.txt");
  std::string plant = "mkdir -p " + out.string() + " && mount -t tmpfs tmpfs " + out.string() + " && mkdir " +
                      (out / "checkpoints").string();
  for (const char* name : {"epoch_1", "epoch_2", "epoch_3", "epoch_4", "epoch_5", "last"})
    plant += " && cp " + stale + " " + (out / "checkpoints" / name).string() + ".safetensors";
  plant += " && touch -d '+1 hour' " + (out / "checkpoints").string() + "/*";
  const pid_t node1 = start("unshare -m --propagation private sh -c \"" + plant + " && exec " + bin("cudagrad-launch") +
                                " --node-rank 1" + common + "\"",
                            dir / "node1.txt");
  pid_t victim = -1;
  for (int i = 0; i < 1200 && victim < 0; ++i) {
    if (fs::exists(out / "checkpoints" / "epoch_1.safetensors")) victim = find_rank(out.string(), 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(victim, 0) << read_file(dir / "node0.txt") << read_file(dir / "node1.txt");
  kill(victim, SIGKILL);
  const std::string newest = test::newest_checkpoint_at_restart(dir / "node0.txt", out / "checkpoints", 1);
  const int rc0 = wait_for(node0, std::chrono::seconds(240)), rc1 = wait_for(node1, std::chrono::seconds(60));
  const std::string log0 = read_file(dir / "node0.txt"), log1 = read_file(dir / "node1.txt");
  ASSERT_EQ(rc0, 0) << log0 << log1;
  ASSERT_EQ(rc1, 0) << log0 << log1;
  EXPECT_NE(log1.find("received rank 0's copy into"), std::string::npos) << log1;
  EXPECT_NE(log0.find("all 2 replicas hold identical resumed weights and optimizer state"), std::string::npos) << log0;
  EXPECT_NE(log0.find("all 2 replicas hold identical weights"), std::string::npos) << log0;
  const std::vector<test::Resumption> r = test::resumptions(out);
  ASSERT_EQ(r.size(), 1u) << log0;
  EXPECT_EQ(r[0].from, newest);
  EXPECT_EQ(r[0].step, test::step_of(newest));
  EXPECT_EQ(test::step_of((out / "checkpoints" / "last.safetensors").string()), 6 * 2048 / 2 / 16)
      << "the run did not finish its 6 epochs";
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

// Issue 38: the job token every rank says to the store first. One node: a random one, the same for
// every rank; --rdzv-id names it (the same on every node of a multi-node job).
TEST(Launch, EveryRankGetsTheJobsToken) {
  const auto dir = test::make_temp_dir("launch_token");
  const fs::path script = dir / "token.sh";
  std::ofstream(script) << "#!/bin/sh\necho \"token=[$CUDAGRAD_JOB_TOKEN]\"\n";
  fs::permissions(script, fs::perms::owner_all);
  auto tokens = [&](const std::string& options) {
    const int rc = wait_for(start(bin("cudagrad-launch") + " --standalone --nproc-per-node 2 " + options + " " +
                                      script.string(), dir / "log.txt"),
                            std::chrono::seconds(60));
    EXPECT_EQ(rc, 0) << read_file(dir / "log.txt");
    std::vector<std::string> found;
    const std::string log = read_file(dir / "log.txt");
    for (size_t p = log.find("token=["); p != std::string::npos; p = log.find("token=[", p + 1))
      found.push_back(log.substr(p + 7, log.find(']', p) - p - 7));
    return found;
  };
  const std::vector<std::string> random = tokens("");
  ASSERT_EQ(random.size(), 2u);
  EXPECT_EQ(random[0].size(), 32u) << random[0];
  EXPECT_EQ(random[0], random[1]);
  EXPECT_NE(tokens("")[0], random[0]) << "another job, another token";
  EXPECT_EQ(tokens("--rdzv-id job-42"), (std::vector<std::string>{"job-42", "job-42"}));
}

// Issue 38: Ctrl-C. The launcher forwards it, then kills ranks still running a grace period later,
// and a second Ctrl-C kills at once. The ranks here ignore SIGINT and SIGTERM (as a rank stuck in
// a collective effectively does), so only the escalation can end them. Event order, not timing:
// each step waits for the launcher's line saying it happened, and a launcher that never escalates
// is caught by wait_for's limit, far past the 1 s grace (the ranks would sleep for 5 minutes).
struct StubbornRanks {
  fs::path dir, log;
  pid_t launcher = -1;
  std::string marker;  // in the command line of every rank's process
  StubbornRanks(const std::string& name, int grace_s) : dir(test::make_temp_dir(name)), log(dir / "log.txt") {
    marker = "300.0" + std::to_string(getpid() % 1000);  // a sleep duration no other test uses
    const fs::path script = dir / "stubborn.sh";
    std::ofstream(script) << "#!/bin/sh\ntrap '' INT TERM\necho ready\nexec sleep " << marker << "\n";
    fs::permissions(script, fs::perms::owner_all);
    launcher = start(bin("cudagrad-launch") + " --standalone --nproc-per-node 2 --grace-seconds " +
                         std::to_string(grace_s) + " " + script.string(),
                     log);
    wait_until("ready", 2);
  }
  // Waits (up to 60 s) until `text` appears `times` times in the log.
  bool wait_until(const std::string& text, int times = 1) {
    for (int i = 0; i < 600; ++i) {
      if (count_lines_with(read_file(log), text) >= times) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "never saw '" << text << "' " << times << " time(s):\n" << read_file(log);
    return false;
  }
};

TEST(LaunchSignals, RanksIgnoringCtrlCAreKilledAfterTheGracePeriod) {
  StubbornRanks job("launch_grace", 1);
  kill(job.launcher, SIGINT);
  const int rc = wait_for(job.launcher, std::chrono::seconds(60));
  const std::string log = read_file(job.log);
  EXPECT_NE(rc, -1) << "the launcher waited for ranks that ignore Ctrl-C\n" << log;
  EXPECT_NE(log.find("sent Interrupt to the ranks; any still running in 1 s are killed"), std::string::npos) << log;
  EXPECT_NE(log.find("ranks still running 1 s after being told to stop: killing them"), std::string::npos) << log;
  EXPECT_EQ(processes_with(job.marker), 0) << "ranks left behind";
}

TEST(LaunchSignals, ASecondCtrlCKillsAtOnce) {
  StubbornRanks job("launch_second", 3600);  // the grace period alone would outlast the test
  kill(job.launcher, SIGINT);
  job.wait_until("press Ctrl-C again to kill them now");
  kill(job.launcher, SIGINT);
  const int rc = wait_for(job.launcher, std::chrono::seconds(60));
  const std::string log = read_file(job.log);
  EXPECT_NE(rc, -1) << "a second Ctrl-C did not end the job\n" << log;
  EXPECT_NE(log.find("second signal: killing the ranks now"), std::string::npos) << log;
  EXPECT_EQ(processes_with(job.marker), 0) << "ranks left behind";
}

}  // namespace
}  // namespace cg
