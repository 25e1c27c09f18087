// DDP with CUDA tensors: two ranks sharing one GPU through Gloo staged in pinned memory (ranks are
// threads here) average gradients to the union batch's, all-reduce each bucket during backward
// and end training with bit-identical weights; single-rank NCCL (the real NCCL path, its
// stream and events) and the modeled backend leave one process's gradients unchanged. Skips
// without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "dist/ddp.h"
#include "engine/ops.h"
#include "engine/runtime.h"
#include "kernels/cuda/device_info.h"
#include "nn/miniresnet.h"
#include "nn/optimizer.h"
#include "support/need_gpu.h"
#include "support/one_rank_store.h"
#include "support/rank_threads.h"
#include "support/tiny_batches.h"
#include "support/tolerance.h"
#include "util/trace.h"

namespace cg::dist {
namespace {

const Device kGpu = Device::cuda(0);

nn::MiniResNetOptions tiny() { return test::tiny_resnet(); }
Tensor images(int64_t first, int64_t count) { return test::union_images(first, count); }
Tensor labels(int64_t first, int64_t count) { return test::union_labels(first, count); }

// BatchNorm in eval mode, so the union batch's gradients are the average of the ranks' exactly.
std::vector<std::vector<float>> union_batch_grads(int64_t per_rank, int world) {
  Generator gen(11);
  nn::MiniResNet m(tiny(), gen);
  m.eval();
  ops::cross_entropy(m(images(0, per_rank * world)), labels(0, per_rank * world)).backward();
  std::vector<std::vector<float>> g;
  for (auto& [n, p] : m.named_parameters()) g.push_back(p.grad().to_vector<float>());
  return g;
}

TEST(CudaDdp, TwoRanksOnOneGpuThroughStagedGloo) {
  NEED_GPU();
  constexpr int kWorld = 2;
  constexpr int64_t kPerRank = 6;
  const auto want = union_batch_grads(kPerRank, kWorld);
  std::vector<std::string> mismatched(kWorld);
  test::run_rank_threads(kWorld, [&](int r, ProcessGroup& group) {
    Generator gen(11);
    nn::MiniResNet m(tiny(), gen);
    m.eval();
    m.to(kGpu);
    DistributedDataParallel ddp(m, make_staged_gloo_comm(group, kGpu), {});
    ops::cross_entropy(ddp(images(r * kPerRank, kPerRank).to(kGpu)), labels(r * kPerRank, kPerRank).to(kGpu))
        .backward();
    ddp.reducer().wait_for_gradients();
    size_t i = 0;
    for (auto& [n, p] : m.named_parameters())
      if (!test::all_close(p.grad().to(Device::cpu()).to_vector<float>(), want[i++], {1e-5, 1e-4}))
        mismatched[size_t(r)] += n + " ";
  });
  for (int r = 0; r < kWorld; ++r) EXPECT_EQ(mismatched[size_t(r)], "") << "rank " << r << ": gradients differ";
}

// Two ranks on one GPU train three SGD steps on their own batches with many small buckets, and
// end with the same weights, bit for bit, not the initial ones. Each bucket's all-reduce is
// issued during backward and waits for its own gradients only: with the compute stream held
// behind a one-second gate right after backward, every all-reduce still completes well within
// the gate. (A transport that waited for the end of backward, or a DDP that issued at
// wait_for_gradients, would wait out the gate.) Real concurrency is measured on a real GPU by
// ModeledAllReducesStartBeforeBackwardEnds; the emulated GPU shows the dependencies.
TEST(CudaDdp, TwoRanksAllReduceDuringBackwardAndEndBitIdentical) {
  NEED_GPU();
  constexpr int kWorld = 2, kSteps = 3;
  constexpr auto kGate = std::chrono::milliseconds(1000);
  std::vector<std::vector<std::vector<float>>> weights(kWorld);
  std::vector<std::string> late(kWorld);
  std::vector<size_t> buckets(kWorld);
  test::run_rank_threads(kWorld, [&](int r, ProcessGroup& group) {
    // Each rank its own compute stream, as in the trainer: on the shared legacy stream one rank's
    // gate would hold the other's backward.
    const Stream compute = Stream::create(kGpu), gate = Stream::create(kGpu);
    StreamGuard on_compute(compute);
    Generator gen(11);
    nn::MiniResNet m(tiny(), gen);
    m.to(kGpu);
    DdpOptions options;
    options.bucket_cap_mb = 0.002;  // about 500 floats: many buckets even for the tiny model
    options.first_bucket_mb = 0.002;
    DistributedDataParallel ddp(m, make_staged_gloo_comm(group, kGpu), options);
    buckets[size_t(r)] = ddp.reducer().buckets().size();
    nn::SGD sgd(m.named_parameters(), {0.1f, 0.9f, 0.f, 0.f, false});
    for (int s = 0; s < kSteps; ++s) {
      const int64_t first = (s * kWorld + r) * 4;
      ops::cross_entropy(ddp(images(first, 4).to(kGpu)), labels(first, 4).to(kGpu)).backward();
      runtime::spin(gate, double(std::chrono::microseconds(kGate).count()));
      Event gate_open = Event::create(kGpu);
      gate_open.record(gate);
      gate_open.wait(compute);
      const auto gated = std::chrono::steady_clock::now();
      for (const auto& w : ddp.reducer().buckets().works()) {
        w->wait();  // on the host: the collective, not the compute stream
        if (w->finished - gated > kGate / 2) late[size_t(r)] += fmt::format("step {} ", s);
      }
      // Nobody runs the gate before both ranks' all-reduces are done (the emulated device runs
      // one kernel at a time: a rank waiting out its gate would hold the other's copies).
      group.barrier();
      ddp.reducer().wait_for_gradients();
      sgd.step(0.1);
      ddp.reducer().zero_grad();
    }
    for (const auto& [name, p] : m.named_parameters())
      weights[size_t(r)].push_back(p.to(Device::cpu()).to_vector<float>());
  });
  Generator gen(11);
  const nn::MiniResNet initial(tiny(), gen);
  EXPECT_GE(buckets[0], 3u);
  for (int r = 0; r < kWorld; ++r)
    EXPECT_EQ(late[size_t(r)], "") << "rank " << r << ": an all-reduce waited for the gate after backward";
  EXPECT_EQ(weights[0], weights[1]) << "the ranks' weights differ";
  EXPECT_NE(weights[0].front(), initial.named_parameters().front().second.to_vector<float>());
}

// One process: the average over one rank is the identity, so DDP must leave gradients as they are.
void expect_single_rank_unchanged(std::unique_ptr<GradientComm> comm) {
  Generator g1(12), g2(12);
  nn::MiniResNet plain(tiny(), g1), wrapped(tiny(), g2);
  plain.to(kGpu);
  wrapped.to(kGpu);
  const std::string name = comm->name();
  DistributedDataParallel ddp(wrapped, std::move(comm), {});
  const Tensor x = images(0, 4).to(kGpu), y = labels(0, 4).to(kGpu);
  ops::cross_entropy(plain(x), y).backward();
  ops::cross_entropy(ddp(x), y).backward();
  ddp.reducer().wait_for_gradients();
  const auto a = plain.named_parameters(), b = wrapped.named_parameters();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(test::all_close(b[i].second.grad().to(Device::cpu()).to_vector<float>(),
                                a[i].second.grad().to(Device::cpu()).to_vector<float>(), {1e-6, 1e-6}))
        << name << ": " << a[i].first;
}

TEST(CudaDdp, SingleRankNcclKeepsTheGradients) {
  NEED_GPU();
  NEED_CUDA_LIBRARY("NCCL");
  TcpStore store = test::one_rank_store();
  expect_single_rank_unchanged(make_nccl_comm(store, 0, 1, kGpu, 60.0));
}

// dist.grad_compression over single-rank NCCL: every gradient comes back as the 16-bit value of
// the plain one (casts on the communication stream, ncclHalf / ncclBfloat16 sum), so each is
// exactly representable in the 16-bit type, within its rounding of the plain gradient, and some
// differ from float32.
TEST(CudaDdp, SingleRankNcclCompressedGradientsAreThe16BitValues) {
  NEED_GPU();
  NEED_CUDA_LIBRARY("NCCL");
  TcpStore store = test::one_rank_store();
  for (GradCompression c : {GradCompression::fp16, GradCompression::bf16}) {
    SCOPED_TRACE(enum_name(c));
    Generator g1(12), g2(12);
    nn::MiniResNet plain(tiny(), g1), wrapped(tiny(), g2);
    plain.to(kGpu);
    wrapped.to(kGpu);
    DdpOptions o;
    o.grad_compression = c;
    o.bucket_cap_mb = 0.002;  // several buckets
    DistributedDataParallel ddp(wrapped, make_nccl_comm(store, 0, 1, kGpu, 60.0), o);
    const Tensor x = images(0, 4).to(kGpu), y = labels(0, 4).to(kGpu);
    ops::cross_entropy(plain(x), y).backward();
    ops::cross_entropy(ddp(x), y).backward();
    ddp.reducer().wait_for_gradients();
    const DType d = wire_dtype(c);
    const double rtol = d == DType::f16 ? 1.0 / 1024 : 1.0 / 128;
    int changed = 0;
    const auto a = plain.named_parameters(), b = wrapped.named_parameters();
    for (size_t i = 0; i < a.size(); ++i) {
      const Tensor got = b[i].second.grad().to(Device::cpu());
      EXPECT_EQ(got.to(d).to(DType::f32).to_vector<float>(), got.to_vector<float>()) << a[i].first << " not 16-bit";
      const std::vector<float> want = a[i].second.grad().to(Device::cpu()).to_vector<float>();
      const std::vector<float> got_values = got.to_vector<float>();
      EXPECT_TRUE(test::all_close(got_values, want, {1e-7, rtol})) << a[i].first;
      for (size_t k = 0; k < want.size(); ++k) changed += got_values[k] != want[k];
    }
    EXPECT_GT(changed, 0) << "no gradient was rounded: compression did not happen";
  }
}

// Ranks sharing a GPU (Gloo staged through pinned memory) have no 16-bit path: refused by name.
TEST(CudaDdp, StagedGlooRefusesCompressionNamingTheKey) {
  NEED_GPU();
  TcpStore store = test::one_rank_store();
  ProcessGroup group(store, 0, 1, "127.0.0.1", {});
  Generator gen(12);
  nn::MiniResNet m(tiny(), gen);
  m.to(kGpu);
  DdpOptions o;
  o.grad_compression = GradCompression::fp16;
  try {
    DistributedDataParallel ddp(m, make_staged_gloo_comm(group, kGpu), o);
    ADD_FAILURE() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("dist.grad_compression=fp16: the staged Gloo transport"), std::string::npos)
        << e.what();
  }
}

TEST(CudaDdp, ModeledBackendOccupiesTheStreamAndKeepsTheGradients) {
  NEED_GPU();
  expect_single_rank_unchanged(make_modeled_comm(8, nvlink_link(), kGpu));
}

// The point of buckets: on the device, the first all-reduce starts while backward still runs.
// Timing events (profiling on) give each collective's device start, compared with an event
// recorded on the compute stream after backward.
TEST(CudaDdp, ModeledAllReducesStartBeforeBackwardEnds) {
  NEED_GPU();
  NEED_REAL_GPU("overlap needs streams that run concurrently");
  trace::clear();
  trace::set_enabled(true);
  Generator gen(13);
  nn::MiniResNet m(tiny(), gen);
  m.to(kGpu);
  DdpOptions options;
  options.bucket_cap_mb = 0.002;  // about 500 floats: many buckets even for the tiny model
  options.first_bucket_mb = 0.002;
  DistributedDataParallel ddp(m, make_modeled_comm(8, nvlink_link(), kGpu), options);
  ASSERT_GE(ddp.reducer().buckets().size(), 3u);
  const Stream s = current_stream(kGpu);
  const Tensor x = images(0, 8).to(kGpu), y = labels(0, 8).to(kGpu);
  ops::cross_entropy(ddp(x), y).backward();
  Event backward_end = Event::create(kGpu, {.timing = true});
  backward_end.record(s);
  ddp.reducer().wait_for_gradients();
  s.synchronize();
  trace::set_enabled(false);
  trace::clear();
  // ms from each bucket's all-reduce start to the end of backward: positive = started before.
  float earliest_lead = -1e9f;
  std::string leads;
  for (const auto& w : ddp.reducer().buckets().works()) {
    ASSERT_TRUE(w && w->device_started.defined());
    const float lead = Event::elapsed_ms(w->device_started, backward_end);
    earliest_lead = std::max(earliest_lead, lead);
    leads += fmt::format("{:.3f} ", lead);
  }
  EXPECT_GT(earliest_lead, 0.0f) << "no all-reduce started before backward ended; ms before its end: " << leads;
}

}  // namespace
}  // namespace cg::dist
