// checkpoint.format=sharded with real processes (cudagrad-launch): every rank writes its own file
// into <name>.shards and rank 0 the index last. A folder written at 4 ranks under full_shard
// resumes at 2 ranks under ZeRO-1, and one written at 2 ranks under shard_grad_op at 4 ranks under
// full_shard, each ending exactly as the same resume from the full-format checkpoint of the same
// partial run (so the folder held the same state), and on one process; a rank that cannot write
// its shard fails every rank, naming it, with no index written and the checkpoints before it
// intact; a folder missing a shard is refused at start, naming the file and the rank, before any
// training; and a rank on a node that cannot see the folder receives rank 0's files.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "support/need_tool.h"
#include "support/training_runs.h"

namespace cg {
namespace {
namespace fs = std::filesystem;
using test::expect_resumed_at_step_5;
using test::expect_same_tensors;
using test::kAdamW;
using test::last;
using test::run;

const std::string kSharded = " checkpoint.format=sharded";

fs::path shards(const fs::path& dir, const std::string& name, const std::string& stem = "last") {
  return dir / name / "checkpoints" / (stem + ".shards");
}

std::vector<std::string> files_in(const fs::path& folder) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(folder)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> expected_files(int ranks) {
  std::vector<std::string> names{"index.json"};
  for (int r = 0; r < ranks; ++r) names.push_back("rank" + std::to_string(r) + "-gen1.safetensors");
  return names;
}

// A partial run of `ranks` under `strategy` stopped at step 5, written in both formats; then
// resumed at `resume_ranks` under `resume_strategy` from each: the two ends must be the same.
void expect_resumes_across_world_sizes(const std::string& tag, int ranks, const std::string& strategy,
                                       int resume_ranks, const std::string& resume_strategy) {
  const auto dir = test::make_temp_dir("sharded_ckpt_" + tag);
  const std::string partial = kAdamW + " train.max_steps=5 dist.sharding=" + strategy;
  run(dir, "part_sharded", ranks, partial + kSharded);
  run(dir, "part_full", ranks, partial);
  const fs::path folder = shards(dir, "part_sharded");
  EXPECT_EQ(files_in(folder), expected_files(ranks));
  EXPECT_FALSE(fs::exists(last(dir, "part_sharded"))) << "a sharded run wrote the full checkpoint too";

  const std::string resumed = kAdamW + " dist.sharding=" + resume_strategy;
  run(dir, "from_shards", resume_ranks, resumed + " checkpoint.resume_from=" + folder.string());
  run(dir, "from_full", resume_ranks, resumed + " checkpoint.resume_from=" + last(dir, "part_full").string());
  expect_same_tensors(last(dir, "from_shards"), last(dir, "from_full"));
  expect_resumed_at_step_5(dir, "from_shards", folder);
  expect_resumed_at_step_5(dir, "from_full", last(dir, "part_full"));

  // One process, writing its own sharded checkpoint of one file.
  run(dir, "one_process", 1, kAdamW + kSharded + " checkpoint.resume_from=" + folder.string());
  expect_resumed_at_step_5(dir, "one_process", folder);
  EXPECT_EQ(files_in(shards(dir, "one_process")), expected_files(1));

  // The folder without one rank's file: refused at start, naming it, and nothing trained.
  const fs::path damaged = dir / "damaged.shards";
  fs::copy(folder, damaged);
  fs::remove(damaged / "rank1-gen1.safetensors");
  const fs::path log = dir / "damaged.log";
  const std::string cmd = test::app("cudagrad-launch") + " --standalone --nproc-per-node " +
                          std::to_string(resume_ranks) + " " +
                          test::train_args(dir / "from_damaged", resumed + " checkpoint.resume_from=" + damaged.string());
  const int rc = test::wait_for(test::start(cmd, log), std::chrono::seconds(120));
  const std::string text = test::read_text(log);
  EXPECT_NE(rc, 0) << text;
  EXPECT_NE(rc, -1) << "hung: " << text;
  EXPECT_NE(text.find("rank 1's shard rank1-gen1.safetensors is missing"), std::string::npos) << text;
  EXPECT_TRUE(test::metrics_records(dir / "from_damaged", "train").empty()) << "trained from a damaged checkpoint";
}

TEST(ShardedCheckpoint, WrittenAtFourRanksUnderFullShardResumesAtTwoUnderZero1) {
  expect_resumes_across_world_sizes("4to2", 4, "full_shard", 2, "optimizer");
}

TEST(ShardedCheckpoint, WrittenAtTwoRanksUnderShardGradOpResumesAtFourUnderFullShard) {
  expect_resumes_across_world_sizes("2to4", 2, "shard_grad_op", 4, "full_shard");
}

// Rank 1 cannot write its shard of the last checkpoint (a folder stands where its file goes): every
// rank fails naming rank 1, no index is written, and the epoch checkpoint before it resumes.
TEST(ShardedCheckpoint, ARankThatCannotWriteItsShardFailsEveryRankAndNoIndexIsWritten) {
  const auto dir = test::make_temp_dir("sharded_ckpt_fail");
  const fs::path folder = shards(dir, "run");
  fs::create_directories(folder / "rank1-gen1.safetensors" / "in_the_way");
  const std::string config = kAdamW + kSharded + " dist.sharding=shard_grad_op checkpoint.save_every=1";
  const fs::path log = dir / "run.log";
  const int rc = test::wait_for(test::start(test::app("cudagrad-launch") + " --standalone --nproc-per-node 2 " +
                                                test::train_args(dir / "run", config),
                                            log),
                                std::chrono::seconds(120));
  const std::string text = test::read_text(log);
  EXPECT_NE(rc, 0) << text;
  EXPECT_NE(rc, -1) << "hung: " << text;
  EXPECT_NE(text.find("checkpoint " + folder.string() + ": rank 1 could not write its shard"), std::string::npos)
      << text;
  EXPECT_FALSE(fs::exists(folder / "index.json")) << "the index was written without rank 1's shard";
  EXPECT_EQ(files_in(shards(dir, "run", "epoch_1")), expected_files(2));

  fs::remove_all(folder);
  run(dir, "resumed", 2, config + " checkpoint.resume_from=" + shards(dir, "run", "epoch_1").string());
  EXPECT_EQ(files_in(shards(dir, "resumed")), expected_files(2));
}

// Nodes that share no disk: node 1 sees an empty folder where node 0's sharded checkpoint is (a
// private tmpfs over it), so rank 1 receives rank 0's files one by one into its own checkpoint
// folder, the index last; the run resumes at step 5 and ends as the same resume on a shared disk.
TEST(ShardedCheckpoint, ARankWithoutTheFolderReceivesRankZerosFiles) {
  NEED_TOOL(::geteuid() == 0 ? "" : "needs root (a mount namespace with a private tmpfs for node 1)");
  const auto dir = test::make_temp_dir("sharded_ckpt_unshared");
  run(dir, "part", 2, kAdamW + " train.max_steps=5" + kSharded);
  const fs::path folder = shards(dir, "part");
  const std::string from = " checkpoint.resume_from=" + folder.string();
  run(dir, "shared", 2, kAdamW + from);
  const std::string common = " --nnodes 2 --nproc-per-node 1 --master-addr 127.0.0.1 --master-port " +
                             std::to_string(test::free_port()) + " " + test::train_args(dir / "unshared", kAdamW + from);
  const pid_t node0 = test::start(test::app("cudagrad-launch") + " --node-rank 0" + common, dir / "node0.log");
  const pid_t node1 = test::start("unshare -m --propagation private sh -c \"mount -t tmpfs tmpfs " +
                                      (dir / "part" / "checkpoints").string() + " && exec " +
                                      test::app("cudagrad-launch") + " --node-rank 1" + common + "\"",
                                  dir / "node1.log");
  const int rc0 = test::wait_for(node0, std::chrono::seconds(120)), rc1 = test::wait_for(node1, std::chrono::seconds(60));
  const std::string log0 = test::read_text(dir / "node0.log"), log1 = test::read_text(dir / "node1.log");
  ASSERT_EQ(rc0, 0) << log0 << log1;
  ASSERT_EQ(rc1, 0) << log0 << log1;
  EXPECT_NE(log1.find("no copy of " + folder.string() + "; received rank 0's copy into " +
                      shards(dir, "unshared").string()),
            std::string::npos)
      << log1;
  expect_same_tensors(last(dir, "unshared"), last(dir, "shared"));
  expect_resumed_at_step_5(dir, "unshared", folder);
}

}  // namespace
}  // namespace cg
