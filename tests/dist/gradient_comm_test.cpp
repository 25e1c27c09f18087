// The transports behind DDP that run anywhere: the ring all-reduce model and the modeled backend
// on the CPU (busy for the modeled time, data untouched; DDP over it computes what one process
// does, full_shard and hybrid_shard included, and times each strategy's collectives by the ring
// model). NCCL and host staging need a GPU: tests/dist/cuda/.
#include <gtest/gtest.h>

#include <chrono>

#include "dist/ddp.h"
#include "dist/gradient_comm.h"
#include "engine/ops.h"
#include "nn/miniresnet.h"
#include "nn/optimizer.h"
#include "support/state_values.h"
#include "support/tiny_batches.h"

namespace cg::dist {
namespace {

TEST(RingModel, FollowsTheRingFormula) {
  const Link link{"test", 10.0, 5.0};  // 10 GB/s, 5 us
  EXPECT_DOUBLE_EQ(ring_all_reduce_ms(1 << 20, 1, link), 0.0);
  // 2(N-1)/N * bytes / bw + 2(N-1) * latency, N = 4: 1.5 * 1e7 / 1e10 s + 6 * 5 us = 1.5 ms + 0.03 ms
  EXPECT_NEAR(ring_all_reduce_ms(10'000'000, 4, link), 1.53, 1e-9);
  // More ranks: the transfer term approaches 2 * bytes / bw, the latency term grows linearly.
  const Link ib = infiniband_link(), nv = nvlink_link();
  EXPECT_GT(ring_all_reduce_ms(11'100'000, 512, ib), ring_all_reduce_ms(11'100'000, 64, ib));
  EXPECT_LT(ring_all_reduce_ms(11'100'000, 8, nv), ring_all_reduce_ms(11'100'000, 8, ib));
  EXPECT_THROW(ring_all_reduce_ms(1, 0, link), Error);
}

TEST(ModeledComm, OnTheCpuTakesTheModeledTimeAndLeavesTheData) {
  const Link slow{"slow", 0.01, 0.0};  // 10 MB/s: 100 KB over 2 ranks = 10 ms
  auto comm = make_modeled_comm(2, slow, Device::cpu());
  Tensor data = Tensor::full({25000}, 1.5);
  const auto start = std::chrono::steady_clock::now();
  auto work = comm->all_reduce_average(data, Stream(), "test");
  comm->wait(*work, Stream());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NEAR(comm->modeled_ms(data.nbytes()), 10.0, 1e-9);
  EXPECT_GE(ms, 9.5);
  EXPECT_LT(ms, 1000.0);
  EXPECT_EQ(data.to_vector<float>(), std::vector<float>(25000, 1.5f));
}

TEST(ModeledComm, DdpOverItComputesWhatOneProcessDoes) {
  const nn::MiniResNetOptions o = test::tiny_resnet();
  Generator g1(3), g2(3);
  nn::MiniResNet plain(o, g1), wrapped(o, g2);
  DistributedDataParallel ddp(wrapped, make_modeled_comm(8, nvlink_link(), Device::cpu()), {});
  const Tensor x = test::union_images(0, 4), y = test::union_labels(0, 4);
  ops::cross_entropy(plain(x), y).backward();
  ops::cross_entropy(ddp(x), y).backward();
  ddp.reducer().wait_for_gradients();
  const auto a = plain.named_parameters(), b = wrapped.named_parameters();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(a[i].second.grad().to_vector<float>(), b[i].second.grad().to_vector<float>()) << a[i].first;
  EXPECT_NE(ddp.comm().name().find("modeled ring of 8"), std::string::npos) << ddp.comm().name();
}

// Three SGD steps with momentum on the union batch, through `ddp` when there is one; the weights
// as one vector.
std::vector<float> after_three_steps(nn::Module& model, DistributedDataParallel* ddp) {
  nn::SGD sgd(model.named_parameters(), {0.1f, 0.9f, 0.f, 0.f, false});
  if (ddp) ddp->reducer().attach(sgd);
  for (int step = 0; step < 3; ++step) {
    const Tensor x = test::union_images(step * 4, 4), y = test::union_labels(step * 4, 4);
    ops::cross_entropy(ddp ? (*ddp)(x) : model(x), y).backward();
    if (ddp) ddp->reducer().wait_for_gradients();
    sgd.step(0.1);
    if (ddp) ddp->reducer().zero_grad();
    else model.zero_grad();
  }
  return test::float_values(ddp ? ddp->reducer().full_model_state(model) : model.state_dict());
}

// The whole model as one unit, so the step's collectives are one unit's and the ring formula can
// be written out here.
DdpOptions one_unit(Sharding sharding) {
  DdpOptions o;
  o.sharding = sharding;
  o.shard_units = [](const std::string&, nn::Module&) { return false; };
  return o;
}

// The one real rank owns every shard: its gathers leave the unit as it is, and it trains bit for
// bit as one process. Per step the unit is gathered for the forward and again for the backward
// and its gradients reduce-scattered: three halves of the 8-GPU ring.
TEST(ModeledComm, FullShardOverItTrainsAsOneProcessAndTimesThreeHalfRings) {
  Generator g1(3), g2(3);
  nn::MiniResNet plain(test::tiny_resnet(), g1), wrapped(test::tiny_resnet(), g2);
  DistributedDataParallel ddp(wrapped, make_modeled_comm(8, nvlink_link(), Device::cpu()),
                              one_unit(Sharding::full_shard));
  EXPECT_EQ(after_three_steps(wrapped, &ddp), after_three_steps(plain, nullptr));
  const size_t bytes = ddp.reducer().bytes_per_step();
  ASSERT_GT(bytes, 0u);
  EXPECT_DOUBLE_EQ(ddp.reducer().modeled_ms_per_step(ddp.comm()), 1.5 * ring_all_reduce_ms(bytes, 8, nvlink_link()));
  // dist.param_dtype=bf16: the two gathers move half the bytes, the reduce-scatter still float32.
  Generator g3(3);
  nn::MiniResNet mixed(test::tiny_resnet(), g3);
  DdpOptions o = one_unit(Sharding::full_shard);
  o.param_dtype = ParamDType::bf16;
  DistributedDataParallel bf16(mixed, make_modeled_comm(8, nvlink_link(), Device::cpu()), o);
  EXPECT_DOUBLE_EQ(bf16.reducer().modeled_ms_per_step(bf16.comm()),
                   0.5 * ring_all_reduce_ms(bytes, 8, nvlink_link()) + ring_all_reduce_ms(bytes / 2, 8, nvlink_link()));
}

// hybrid_shard on the modeled rings (train::DistContext builds them so: nodes of 8 on NVLink, 2
// nodes on InfiniBand timed for an eighth of the bytes): the node's three halves of a ring, then
// the all-reduce of a node rank's shard, an eighth of the unit, across the nodes.
TEST(ModeledComm, HybridShardTimesTheCrossNodeRingForOneNodeRanksShard) {
  Generator g1(3), g2(3);
  nn::MiniResNet plain(test::tiny_resnet(), g1), wrapped(test::tiny_resnet(), g2);
  auto node = make_modeled_comm(8, nvlink_link(), Device::cpu());
  auto replicas = make_modeled_comm(2, infiniband_link(), Device::cpu(), 1.0 / 8);
  DdpOptions o = one_unit(Sharding::hybrid_shard);
  o.hybrid_node = node.get();
  o.hybrid_replicas = replicas.get();
  DistributedDataParallel ddp(wrapped, make_modeled_comm(16, nvlink_link(), Device::cpu()), o);
  EXPECT_EQ(after_three_steps(wrapped, &ddp), after_three_steps(plain, nullptr));
  const size_t bytes = ddp.reducer().bytes_per_step();
  EXPECT_DOUBLE_EQ(ddp.reducer().modeled_ms_per_step(ddp.comm()),
                   1.5 * ring_all_reduce_ms(bytes, 8, nvlink_link()) +
                       ring_all_reduce_ms(size_t(double(bytes) / 8), 2, infiniband_link()));
  EXPECT_NE(ddp.reducer().describe().find("across modeled ring of 2 ranks on InfiniBand"), std::string::npos)
      << ddp.reducer().describe();
}

}  // namespace
}  // namespace cg::dist
