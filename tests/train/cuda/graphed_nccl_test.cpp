// train.cuda_graph with DDP over NCCL, on one rank: the captured step contains the buckets'
// NCCL all-reduces (issued on the communication stream, joined to the capture by events), and
// each replay is watched by the NCCL watchdog as one operation. From the same seed and batches,
// replayed steps give bit for bit the losses and weights of eager steps over the same single-rank
// NCCL DDP (native kernels: deterministic). cudagrad-train cannot run NCCL on one process (one
// process has nothing to communicate), so the parts are assembled here. Skips without a GPU.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "graphed_vs_eager.h"
#include "train/builders.h"
#include "train/device_setup.h"
#include "train/step.h"
#include "dist/ddp.h"
#include "dist/tcp_store.h"
#include "engine/random.h"
#include "support/gpu_ops.h"
#include "support/one_rank_store.h"

namespace cg::train {
namespace {

using test::expect_same_losses;

std::vector<data::DeviceBatch> batches(Device device, int count) { return test::step_batches(device, count, 7); }

struct Run {
  std::vector<float> losses;
  std::vector<std::vector<float>> weights;
  int64_t replays = 0;
  std::string transport;
};

// `steps` optimizer steps of a small MiniResNet under single-rank NCCL DDP, graphed or eager.
Run train(bool graphed, int steps, const std::vector<std::string>& extra) {
  std::vector<std::string> kv{"train.device=cuda", "model.widths=[8,16]", "model.blocks=[1,1]", "model.in_channels=3",
                              "kernels.conv=native", "kernels.batch_norm=native", "dist.bucket_cap_mb=0.01",
                              graphed ? "train.cuda_graph=true" : "train.cuda_graph=false"};
  kv.insert(kv.end(), extra.begin(), extra.end());
  const TrainConfig c = load_train_config("", kv);
  const Device device = choose_device(c, 0);
  const Stream compute = Stream::create(device);
  StreamGuard on_compute(compute);
  Generator gen(uint64_t(c.train.seed));
  nn::MiniResNet model(model_options(c), gen);
  model.to(device);
  auto optimizer = make_optimizer(c, model);

  dist::TcpStore store = test::one_rank_store();
  dist::DdpOptions options;
  options.bucket_cap_mb = c.dist.bucket_cap_mb;  // several buckets: several captured all-reduces
  dist::DistributedDataParallel ddp(model, dist::make_nccl_comm(store, 0, 1, device, 60.0), options);
  TrainStep step(c, model, *optimizer, &ddp, compute);
  EXPECT_EQ(step.graph() != nullptr, graphed);

  const std::vector<data::DeviceBatch> data = batches(device, 3);
  Run out;
  out.transport = ddp.comm().name();
  EXPECT_GE(ddp.reducer().buckets().size(), 2u);
  for (int s = 0; s < steps; ++s) {
    const data::DeviceBatch& b = data[size_t(s) % data.size()];
    const double lr = 0.05 / (1.0 + 0.2 * s);
    const Tensor loss = step.run_micro_step(b, {.lr = lr}).loss;
    out.losses.push_back(float(loss.item()));  // a replay's watchdog error would surface here
  }
  out.replays = graphed ? step.graph()->replays() : 0;
  for (const auto& [name, p] : model.named_parameters()) out.weights.push_back(test::host_f32(p));
  compute.synchronize();
  return out;
}

void expect_graphed_equals_eager(const std::vector<std::string>& extra) {
  const int steps = 8;  // 3 eager, the capture, then replays
  const Run eager = train(false, steps, extra), graphed = train(true, steps, extra);
  EXPECT_NE(graphed.transport.find("nccl"), std::string::npos) << graphed.transport;
  EXPECT_EQ(graphed.replays, steps - StepGraph::kEagerSteps);
  expect_same_losses(eager.losses, graphed.losses);
  ASSERT_EQ(eager.weights.size(), graphed.weights.size());
  for (size_t i = 0; i < eager.weights.size(); ++i) EXPECT_EQ(eager.weights[i], graphed.weights[i]) << "parameter " << i;
}

TEST(GraphedNccl, SingleRankFp32StepsReplayLikeEager) {
  NEED_GPU();
  NEED_CUDA_LIBRARY("NCCL");
  expect_graphed_equals_eager({"optim.name=sgd", "optim.momentum=0.9"});
}

TEST(GraphedNccl, SingleRankFp16WithLossScalingReplaysLikeEager) {
  NEED_GPU();
  NEED_CUDA_LIBRARY("NCCL");
  // The overflow flag is agreed over the ranks through NCCL too, inside the graph.
  expect_graphed_equals_eager({"optim.name=adamw", "amp.enabled=true", "amp.dtype=fp16"});
}

}  // namespace
}  // namespace cg::train
