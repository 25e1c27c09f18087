// hybrid_shard inside one process: four ranks as threads, two "nodes" of two, each rank with its
// node's process group and its replica group over the job's store (key prefixes, as the trainer's
// DistContext::hybrid_comms makes them). A step's all-reduces of the gradient shards across the
// nodes are issued during backward, one as each unit's reduce-scatter is taken up (by the order
// of events, no clock), and backward does not wait for them: with the replica group slowed down,
// they are still in flight when backward returns, and wait_for_gradients waits for them. A few
// AdamW steps with gradient accumulation end within float32 rounding of DDP over all four ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <optional>

#include "dist/ddp.h"
#include "dist/full_shard.h"
#include "engine/ops.h"
#include "nn/miniresnet.h"
#include "nn/optimizer.h"
#include "support/rank_threads.h"
#include "support/state_values.h"
#include "support/tiny_batches.h"
#include "support/tolerance.h"

namespace cg::dist {
namespace {
using namespace std::chrono_literals;

// Rank r of four: node r / 2, shard r % 2.
struct HybridGroups {
  std::unique_ptr<ProcessGroup> node, replicas;
  std::unique_ptr<GradientComm> node_comm, replica_comm;
  HybridGroups(int rank, TcpStore& store, std::chrono::milliseconds replica_delay = 0ms) {
    ProcessGroupOptions po;
    po.timeout = 30s;
    po.key_prefix = fmt::format("hybrid/node{}/", rank / 2);
    node = std::make_unique<ProcessGroup>(store, rank % 2, 2, "127.0.0.1", po);
    po.key_prefix = fmt::format("hybrid/shard{}/", rank % 2);
    po.artificial_delay = replica_delay;
    replicas = std::make_unique<ProcessGroup>(store, rank / 2, 2, "127.0.0.1", po);
    node_comm = make_host_gloo_comm(*node);
    replica_comm = make_host_gloo_comm(*replicas);
  }
  DdpOptions options() const {
    DdpOptions o;
    o.sharding = Sharding::hybrid_shard;
    o.shard_units = [](const std::string&, nn::Module& m) { return nn::is_residual_block(m); };
    o.hybrid_node = node_comm.get();
    o.hybrid_replicas = replica_comm.get();
    return o;
  }
};

TEST(HybridShard, AllReducesAcrossNodesAreIssuedDuringBackwardAndNotWaitedForThere) {
  test::run_rank_threads(4, [&](int rank, TcpStore& store, ProcessGroup& group) {
    HybridGroups groups(rank, store, /*replica_delay=*/300ms);
    Generator gen(0);
    nn::MiniResNet model(test::tiny_resnet(), gen);
    DistributedDataParallel ddp(model, group, groups.options());
    nn::SGD sgd(model.named_parameters(), {0.1f, 0.9f, 0.f, 0.f, false});
    ddp.reducer().attach(sgd);
    auto& full = dynamic_cast<FullShard&>(ddp.reducer());
    const size_t n = full.units().size();
    ASSERT_GE(n, 3u);
    ops::cross_entropy(ddp(test::union_images(rank * 4, 4)), test::union_labels(rank * 4, 4)).backward();
    EXPECT_GT(full.all_reduces_in_flight(), 0u) << "backward waited for the all-reduces across nodes";
    ddp.reducer().wait_for_gradients();
    EXPECT_EQ(full.all_reduces_in_flight(), 0u);
    const std::vector<std::string>& ev = full.events();
    auto at = [&](const std::string& e) { return size_t(std::find(ev.begin(), ev.end(), e) - ev.begin()); };
    const std::string order = fmt::format("{}", fmt::join(ev, " "));
    // The blocks' all-reduces are issued inside backward, each after that block's backward began;
    // the root's (its stem's gradients are the last) once the gradients are waited for.
    for (size_t u = 1; u < n; ++u) {
      EXPECT_LT(at(fmt::format("b{}", u)), at(fmt::format("a{}", u))) << order;
      EXPECT_LT(at(fmt::format("a{}", u)), at("w")) << order;
    }
    EXPECT_LT(at("w"), at("a0")) << order;
    EXPECT_LT(at("a0"), ev.size()) << order;
  });
}

// Weights of `model` as one vector (the ranks' shards are gathered by a forward: its units' buffers).
std::vector<float> weights_after(nn::Module& model, DistributedDataParallel& ddp, nn::Optimizer& opt, int rank) {
  for (int step = 0; step < 3; ++step) {
    for (int micro = 0; micro < 2; ++micro) {
      std::optional<DistributedDataParallel::NoSync> no_sync;
      if (micro == 0) no_sync.emplace(ddp.no_sync());
      const int first = (step * 2 + micro) * 16 + rank * 4;
      ops::cross_entropy(ddp(test::union_images(first, 4)), test::union_labels(first, 4)).backward();
    }
    ddp.reducer().wait_for_gradients();
    opt.step(0.01);
    ddp.reducer().zero_grad();
  }
  return test::float_values(ddp.reducer().full_model_state(model));
}

TEST(HybridShard, AdamWWithAccumulationMatchesDdpOverAllFourWithinRounding) {
  std::vector<float> hybrid, plain;
  test::run_rank_threads(4, [&](int rank, TcpStore& store, ProcessGroup& group) {
    HybridGroups groups(rank, store);
    Generator gen(0);
    nn::MiniResNet model(test::tiny_resnet(), gen);
    DistributedDataParallel ddp(model, group, groups.options());
    nn::AdamW opt(model.named_parameters(), {0.01f, 0.9f, 0.999f, 1e-8f, 0.05f});
    ddp.reducer().attach(opt);
    std::vector<float> w = weights_after(model, ddp, opt, rank);
    if (rank == 0) hybrid = std::move(w);
  });
  test::run_rank_threads(4, [&](int rank, ProcessGroup& group) {
    Generator gen(0);
    nn::MiniResNet model(test::tiny_resnet(), gen);
    DistributedDataParallel ddp(model, group, DdpOptions{});
    nn::AdamW opt(model.named_parameters(), {0.01f, 0.9f, 0.999f, 1e-8f, 0.05f});
    ddp.reducer().attach(opt);
    std::vector<float> w = weights_after(model, ddp, opt, rank);
    if (rank == 0) plain = std::move(w);
  });
  ASSERT_FALSE(hybrid.empty());
  EXPECT_LE(test::relative_l2(hybrid, plain), 1e-5) << "hybrid_shard drifted from DDP";
}

}  // namespace
}  // namespace cg::dist
