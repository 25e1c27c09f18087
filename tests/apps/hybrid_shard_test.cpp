// dist.sharding=hybrid_shard with real processes: two cudagrad-launch "nodes" on this machine, two
// ranks each (--nnodes 2 --nproc-per-node 2). Each node's ranks shard the parameters between them
// and all-reduce their gradient shards with the other node's rank holding the same shard: the run
// (AdamW, the cosine schedule, gradient accumulation) ends within float32 rounding of DDP on four
// ranks, rank 0 holding half the parameters, gradients and optimizer state, and its timeline names
// each unit's gradient shard all-reduced across the nodes after its node's reduce-scatter. A sharded checkpoint written so (the second node's files empty: its
// shards are the first node's) resumes at 2 ranks under full_shard as the full checkpoint of the
// same run does. With SyncBatchNorm, too, it ends within rounding of DDP. One rank a node is
// refused at start, naming why, on both nodes.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <string>

#include "support/training_runs.h"

namespace cg {
namespace {
namespace fs = std::filesystem;
using test::expect_close_tensors;
using test::expect_resumed_at_step_5;
using test::expect_same_tensors;
using test::kAdamW;
using test::last;
using test::run;

const std::string kHybrid = " dist.sharding=hybrid_shard";

struct Nodes {
  int rc[2] = {-1, -1};
  std::string log;  // node 0's, then node 1's
};

// Two launchers of `per_node` ranks each into dir/name.
Nodes run_two_nodes(const fs::path& dir, const std::string& name, int per_node, const std::string& extra) {
  const std::string common = " --nnodes 2 --nproc-per-node " + std::to_string(per_node) +
                             " --master-addr 127.0.0.1 --master-port " + std::to_string(test::free_port()) + " " +
                             test::train_args(dir / name, extra);
  pid_t pid[2];
  for (int node = 0; node < 2; ++node)
    pid[node] = test::start(test::app("cudagrad-launch") + " --node-rank " + std::to_string(node) + common,
                            dir / (name + ".node" + std::to_string(node) + ".log"));
  Nodes n;
  for (int node = 0; node < 2; ++node) {
    n.rc[node] = test::wait_for(pid[node], std::chrono::seconds(240));
    n.log += test::read_text(dir / (name + ".node" + std::to_string(node) + ".log"));
  }
  return n;
}

std::string run_hybrid(const fs::path& dir, const std::string& name, const std::string& extra) {
  const Nodes n = run_two_nodes(dir, name, 2, extra + kHybrid);
  EXPECT_EQ(n.rc[0], 0) << n.log;
  EXPECT_EQ(n.rc[1], 0) << n.log;
  return n.log;
}

TEST(HybridShard, TwoNodesOfTwoRanksWithAccumulationEndWithinRoundingOfDdpOnFour) {
  const auto dir = test::make_temp_dir("hybrid");
  const std::string accumulate = kAdamW + " train.grad_accum_steps=2";
  const std::string log = run_hybrid(dir, "hybrid", accumulate + " profile.enabled=true");
  const std::string plain = run(dir, "plain", 4, accumulate);
  expect_close_tensors(last(dir, "hybrid"), last(dir, "plain"), test::kAfterABranchFlip);
  EXPECT_NE(log.find("2 nodes of 2 ranks; this rank holds shard 0 on node 0"), std::string::npos) << log;
  EXPECT_NE(log.find("all 4 replicas hold identical buffers"), std::string::npos) << log;
  // Rank 0 holds about half (its node's share) of the parameters, gradients and state.
  const test::Held h = test::held(log), p = test::held(plain);
  EXPECT_NEAR(h.state / p.state, 0.5, 0.1) << h.state << " of " << p.state;
  EXPECT_NEAR(h.gradients / p.gradients, 0.5, 0.1) << h.gradients << " of " << p.gradients;
  EXPECT_LE(h.parameters, 1.1 * p.gradients / 2) << h.parameters;
  // Each unit's gradients: reduce-scattered over the node (its whole length), then the shard (about
  // half of it, two ranks a node: the ring's blocks are aligned) all-reduced across the nodes.
  std::set<int64_t> scattered, reduced;
  int gathers = 0;
  const auto trace = nlohmann::json::parse(test::read_text(dir / "hybrid" / "trace_rank0.json"))["traceEvents"];
  std::smatch m;
  for (const auto& e : trace) {
    if (e.value("cat", "") != "communication") continue;
    const std::string name = e["name"];
    if (std::regex_search(name, m, std::regex(R"(^reduce_scatter (\d+) floats)")))
      scattered.insert(std::stoll(m[1]));
    if (std::regex_search(name, m, std::regex(R"(^all_reduce (\d+) floats)"))) reduced.insert(std::stoll(m[1]));
    gathers += name.rfind("all_gather", 0) == 0;
  }
  EXPECT_EQ(scattered.size(), 3u) << "three units' reduce-scatters";
  for (const int64_t unit : scattered)
    EXPECT_TRUE(std::any_of(reduced.begin(), reduced.end(), [&](int64_t n) { return std::abs(2 * n - unit) <= 32; }))
        << "no all-reduce of half a " << unit << "-float unit's gradients across the nodes";
  EXPECT_GT(gathers, 0) << "no all-gather on the timeline";
}

// SyncBatchNorm's statistics go over the whole job's group, beside hybrid_shard's two levels.
TEST(HybridShard, WithSyncBatchNormEndsWithinRoundingOfDdpOnFour) {
  const auto dir = test::make_temp_dir("hybrid_syncbn");
  const std::string sync = kAdamW + " model.sync_batchnorm=true";
  run_hybrid(dir, "hybrid", sync);
  run(dir, "plain", 4, sync);
  expect_close_tensors(last(dir, "hybrid"), last(dir, "plain"), test::kAfterABranchFlip);
}

TEST(HybridShard, ItsShardedCheckpointResumesAtTwoRanksUnderFullShard) {
  const auto dir = test::make_temp_dir("hybrid_ckpt");
  const std::string partial = kAdamW + " train.max_steps=5";
  run_hybrid(dir, "part_sharded", partial + " checkpoint.format=sharded");
  run_hybrid(dir, "part_full", partial);
  const fs::path folder = dir / "part_sharded" / "checkpoints" / "last.shards";
  for (int r = 0; r < 4; ++r) {
    const safetensors::File f = safetensors::load((folder / ("rank" + std::to_string(r) + "-gen1.safetensors")).string());
    if (r < 2) EXPECT_FALSE(f.tensors.empty()) << "rank " << r << " wrote nothing";
    else EXPECT_TRUE(f.tensors.empty()) << "rank " << r << " (the second node) wrote its replica's pieces again";
  }
  const std::string resumed = kAdamW + " dist.sharding=full_shard checkpoint.resume_from=";
  run(dir, "from_shards", 2, resumed + folder.string());
  run(dir, "from_full", 2, resumed + last(dir, "part_full").string());
  expect_same_tensors(last(dir, "from_shards"), last(dir, "from_full"));
  expect_resumed_at_step_5(dir, "from_shards", folder);
}

TEST(HybridShard, OneRankANodeIsRefusedOnBothNodes) {
  const auto dir = test::make_temp_dir("hybrid_one");
  const Nodes n = run_two_nodes(dir, "one", 1, kAdamW + kHybrid + " dist.timeout_s=20");
  for (int node = 0; node < 2; ++node) {
    EXPECT_NE(n.rc[node], 0) << n.log;
    EXPECT_NE(n.rc[node], -1) << "node " << node << " hung:\n" << n.log;
  }
  EXPECT_NE(n.log.find("dist.sharding=hybrid_shard needs several ranks a node"), std::string::npos) << n.log;
}

}  // namespace
}  // namespace cg
