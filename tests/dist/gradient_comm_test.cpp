// The transports behind DDP that run anywhere: the ring all-reduce model and the modeled backend
// on the CPU (busy for the modeled time, data untouched; DDP over it computes what one process
// does). NCCL and host staging need a GPU: tests/dist/cuda/.
#include <gtest/gtest.h>

#include <chrono>

#include "dist/ddp.h"
#include "dist/gradient_comm.h"
#include "engine/ops.h"
#include "nn/miniresnet.h"
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

}  // namespace
}  // namespace cg::dist
