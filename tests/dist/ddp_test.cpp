// DDP on real Gloo collectives, with ranks as threads of one process: averaged gradients equal
// the single-process gradients of the union batch, replicas stay bit-identical, gradient
// accumulation under no_sync communicates nothing, and all-reduces overlap backward.
#include <gtest/gtest.h>

#include <thread>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>

#include "dist/ddp.h"
#include "dist/overflow_agreement.h"
#include "engine/ops.h"
#include "nn/grad_scaler.h"
#include "nn/miniresnet.h"
#include "nn/optimizer.h"
#include "support/rank_threads.h"
#include "support/tiny_batches.h"

namespace cg::dist {
namespace {

// The union batch: 6 images per rank.
constexpr int64_t kPerRank = 6;
using test::union_images;
using test::union_labels;
nn::MiniResNetOptions tiny() { return test::tiny_resnet(); }
Tensor batch_images(int64_t first, int64_t count) { return union_images(first, count); }
Tensor batch_labels(int64_t first, int64_t count) { return union_labels(first, count); }


std::vector<float> flat_grads(const nn::Module& m) {
  std::vector<float> out;
  for (auto& [name, p] : m.named_parameters()) {
    auto g = p.grad().to_vector<float>();
    out.insert(out.end(), g.begin(), g.end());
  }
  return out;
}

std::vector<uint8_t> state_bytes(const nn::Module& m) {
  std::vector<uint8_t> out;
  for (auto& [name, t] : m.state_dict()) {
    const uint8_t* p = static_cast<const uint8_t*>(t.raw_data());
    out.insert(out.end(), p, p + t.nbytes());
  }
  return out;
}

class DdpWorld : public ::testing::TestWithParam<int> {};

TEST_P(DdpWorld, AveragedGradientsEqualUnionBatchGradients) {
  const int world = GetParam();
  // Reference: one process, the whole union batch, BN in eval mode (batch statistics would
  // differ per rank otherwise), rank 0's initial weights (seed 0).
  Generator g0(0);
  nn::MiniResNet ref(tiny(), g0);
  ref.eval();
  ops::cross_entropy(ref(batch_images(0, kPerRank * world)), batch_labels(0, kPerRank * world)).backward();
  const std::vector<float> want = flat_grads(ref);

  std::vector<std::vector<float>> got(static_cast<size_t>(world));
  test::run_rank_threads(world, [&](int rank, ProcessGroup& group) {
    Generator gen{static_cast<uint64_t>(rank)};  // different init: DDP must broadcast rank 0's
    nn::MiniResNet model(tiny(), gen);
    model.eval();
    DdpOptions o;
    o.bucket_cap_mb = 0.002;  // several buckets even for a tiny model
    o.first_bucket_mb = 0.0005;
    DistributedDataParallel ddp(model, group, o);
    EXPECT_GT(ddp.reducer().buckets().size(), 2u);
    ops::cross_entropy(ddp(batch_images(rank * kPerRank, kPerRank)), batch_labels(rank * kPerRank, kPerRank))
        .backward();
    ddp.reducer().wait_for_gradients();
    got[size_t(rank)] = flat_grads(model);
  });
  for (int r = 0; r < world; ++r) {
    ASSERT_EQ(got[size_t(r)].size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[size_t(r)][i], want[i], 1e-5 * std::max(1.0f, std::abs(want[i]))) << "rank " << r << " element " << i;
  }
}

TEST_P(DdpWorld, ReplicasStayBitIdenticalOverTrainingSteps) {
  const int world = GetParam();
  std::vector<std::vector<uint8_t>> states(static_cast<size_t>(world));
  test::run_rank_threads(world, [&](int rank, ProcessGroup& group) {
    Generator gen{static_cast<uint64_t>(rank)};
    nn::MiniResNet model(tiny(), gen);
    DistributedDataParallel ddp(model, group, {0.002, 0.0005, true});
    nn::SGD sgd(model.named_parameters(), {0.05f, 0.9f, 1e-4f, 0.f, true});
    for (int step = 0; step < 4; ++step) {
      const int64_t first = (step * world + rank) * kPerRank;
      ops::cross_entropy(ddp(batch_images(first, kPerRank)), batch_labels(first, kPerRank)).backward();
      ddp.reducer().wait_for_gradients();
      sgd.step(0.05);
      ddp.reducer().zero_grad();
    }
    // Running statistics differ per rank until the next forward's broadcast: do it, then compare.
    ddp.sync_buffers();
    states[size_t(rank)] = state_bytes(model);
  });
  for (int r = 1; r < world; ++r) EXPECT_TRUE(states[size_t(r)] == states[0]) << "rank " << r << " diverged";
}

INSTANTIATE_TEST_SUITE_P(Ranks, DdpWorld, ::testing::Values(2, 3));

TEST(Ddp, NoSyncAccumulatesWithoutCommunicating) {
  const int world = 2;
  // Reference: one step over the union of both micro-batches of both ranks (eval-mode BN).
  Generator g0(0);
  nn::MiniResNet ref(tiny(), g0);
  ref.eval();
  nn::SGD ref_sgd(ref.named_parameters(), {0.1f, 0.f, 0.f, 0.f, false});
  ops::cross_entropy(ref(batch_images(0, 4 * kPerRank)), batch_labels(0, 4 * kPerRank)).backward();
  ref_sgd.step(0.1);

  std::vector<std::vector<float>> weights(world);
  std::vector<int64_t> during_accumulation(world);
  test::run_rank_threads(world, [&](int rank, ProcessGroup& group) {
    Generator gen{static_cast<uint64_t>(rank)};
    nn::MiniResNet model(tiny(), gen);
    model.eval();
    DistributedDataParallel ddp(model, group, {0.002, 0.0005, true});
    nn::SGD sgd(model.named_parameters(), {0.1f, 0.f, 0.f, 0.f, false});
    const int64_t before = group.all_reduces_issued();
    for (int micro = 0; micro < 2; ++micro) {
      const int64_t first = (rank * 2 + micro) * kPerRank;
      // Each micro-batch's loss is scaled by 1/2, as the trainer does for accumulation.
      auto loss = [&] {
        return ops::scale(ops::cross_entropy(ddp(batch_images(first, kPerRank)), batch_labels(first, kPerRank)), 0.5);
      };
      if (micro == 0) {
        const auto accumulate_only = ddp.no_sync();
        loss().backward();
        during_accumulation[size_t(rank)] = group.all_reduces_issued() - before;
      } else {
        loss().backward();
      }
      ddp.reducer().wait_for_gradients();
    }
    sgd.step(0.1);
    for (auto& [n, p] : model.named_parameters()) {
      auto v = p.to_vector<float>();
      weights[size_t(rank)].insert(weights[size_t(rank)].end(), v.begin(), v.end());
    }
  });
  std::vector<float> want;
  for (auto& [n, p] : ref.named_parameters()) {
    auto v = p.to_vector<float>();
    want.insert(want.end(), v.begin(), v.end());
  }
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(during_accumulation[size_t(r)], 0) << "rank " << r << " communicated during no_sync";
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(weights[size_t(r)][i], want[i], 1e-5 * std::max(1.0f, std::abs(want[i]))) << i;
  }
}

// All-reduces run while backward goes on, shown by the order of events, never by durations: a
// hook on a parameter of the first stage (its gradient is among the last backward computes, but
// not in the last bucket) holds backward until some bucket's all-reduce has completed. A DDP that
// overlaps has launched the later layers' buckets long before, so the hook returns as soon as one
// finishes; one that holds every all-reduce until backward ends (or until the last bucket is
// ready) has launched none by then, and the hook gives up after 20 s, failing the test. (It used
// to compare timestamps against an artificial 4-8 ms delay per all-reduce; CI's busy cores broke
// that margin once.)
TEST(Ddp, AllReducesOverlapBackward) {
  using Clock = std::chrono::steady_clock;
  bool completed_mid_backward = false;
  double first_start_ms = 0, first_finish_ms = 0, backward_end_ms = 0;
  test::run_rank_threads(2, [&](int rank, ProcessGroup& group) {
    Generator gen(0);
    nn::MiniResNetOptions o;
    o.in_channels = 2;
    o.widths = {16, 32, 64};
    o.blocks = {2, 2, 2};
    nn::MiniResNet model(o, gen);
    DistributedDataParallel ddp(model, group, {0.2, 0.05, true});
    Tensor x = Tensor::empty({8, 2, 16, 16});
    normal_(x, gen, 0, 1);
    bool seen = false;  // this rank's hook saw a completed all-reduce
    for (auto& [name, p] : model.named_parameters())
      if (name == "layer1.0.conv1.weight")
        p.register_grad_ready_hook([&](Tensor&) {
          for (int i = 0; i < 2000 && !seen; ++i) {
            for (const auto& w : ddp.reducer().buckets().works()) seen = seen || (w && w->done());
            if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
        });
    const auto t0 = Clock::now();
    ops::cross_entropy(ddp(x), batch_labels(0, 8)).backward();
    const auto backward_end = Clock::now();
    ddp.reducer().wait_for_gradients();
    if (rank != 0) return;
    auto ms = [&](Clock::time_point t) { return std::chrono::duration<double, std::milli>(t - t0).count(); };
    completed_mid_backward = seen;
    backward_end_ms = ms(backward_end);
    first_start_ms = first_finish_ms = 1e9;
    for (auto& w : ddp.reducer().buckets().works()) {
      first_start_ms = std::min(first_start_ms, ms(w->started));
      first_finish_ms = std::min(first_finish_ms, ms(w->finished));
    }
    EXPECT_GE(ddp.reducer().buckets().size(), 3u);
  });
  EXPECT_TRUE(completed_mid_backward) << "no all-reduce completed while backward ran";
  EXPECT_LT(first_finish_ms, backward_end_ms) << "no all-reduce completed while backward ran";
  std::printf("overlap: first all-reduce at %.1f ms, first done at %.1f ms, backward ended at %.1f ms\n",
              first_start_ms, first_finish_ms, backward_end_ms);
}

TEST(Ddp, UnusedParameterIsNamed) {
  test::run_rank_threads(2, [&](int rank, ProcessGroup& group) {
    Generator gen(0);
    nn::MiniResNet model(tiny(), gen);
    DistributedDataParallel ddp(model, group, {});
    ddp(batch_images(0, 2));  // arms the gradient hooks; its output is not used
    // Backward through the stem only: every later parameter gets no gradient.
    Tensor w = model.named_parameters().front().second;
    ops::scale(ops::conv2d(batch_images(0, 2), w, Tensor(), {.stride = 1, .padding = 1}), 1.0).backward(Tensor::full({2, 4, 8, 8}, 1.0));
    try {
      ddp.reducer().wait_for_gradients();
      ADD_FAILURE() << "unused parameters went unnoticed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("fc.weight"), std::string::npos) << e.what();
    }
  });
}

// Zeroing through the optimizer (or the module) frees the gradients DDP all-reduces: the next
// forward refuses, naming what to call instead, rather than silently rebuilding every bucket.
TEST(Ddp, ZeroingThroughTheOptimizerIsAnError) {
  test::run_rank_threads(2, [&](int rank, ProcessGroup& group) {
    Generator gen(0);
    nn::MiniResNet model(tiny(), gen);
    DistributedDataParallel ddp(model, group, {});
    nn::SGD sgd(model.named_parameters(), {0.1f, 0.f, 0.f, 0.f, false});
    ops::cross_entropy(ddp(batch_images(rank * kPerRank, kPerRank)), batch_labels(0, kPerRank)).backward();
    ddp.reducer().wait_for_gradients();
    sgd.step(0.1);
    sgd.zero_grad();  // the misuse
    try {
      ddp(batch_images(0, kPerRank));
      ADD_FAILURE() << "forward ran on gradients the optimizer had freed";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("DistributedDataParallel::reducer().zero_grad()"), std::string::npos) << e.what();
    }
  });
}

// Counts the collectives a GradientComm is asked for, passing them on.
class CountingComm : public GradientComm {
 public:
  CountingComm(std::unique_ptr<GradientComm> inner, int64_t* broadcasts) : inner_(std::move(inner)), broadcasts_(broadcasts) {}
  std::string name() const override { return "counting " + inner_->name(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::shared_ptr<Work> all_reduce_average(Tensor& data, const Stream& compute, const std::string& what) override {
    return inner_->all_reduce_average(data, compute, what);
  }
  void all_reduce_sum(double* data, int64_t count, const Stream& compute, const std::string& what) override {
    inner_->all_reduce_sum(data, count, compute, what);
  }
  void wait(Work& work, const Stream& compute) override { inner_->wait(work, compute); }
  void broadcast(Tensor& t, const Stream& compute) override {
    ++*broadcasts_;
    inner_->broadcast(t, compute);
  }

 private:
  std::unique_ptr<GradientComm> inner_;
  int64_t* broadcasts_;
};

// Every BatchNorm's running statistics come from rank 0 before each forward, all in one collective
// (the weights and buffers at construction too), not one per buffer.
TEST(Ddp, BuffersArriveInOneCoalescedBroadcastPerForward) {
  std::vector<int64_t> at_start(2), per_forward(2);
  std::vector<std::string> differing(2);
  test::run_rank_threads(2, [&](int rank, ProcessGroup& group) {
    Generator gen(0);
    nn::MiniResNet model(tiny(), gen);
    model.eval();  // forward leaves the statistics alone: after it they must be exactly rank 0's
    ASSERT_GT(model.named_buffers().size(), 3u);
    int64_t broadcasts = 0;
    DistributedDataParallel ddp(model, std::make_unique<CountingComm>(make_host_gloo_comm(group), &broadcasts), {});
    at_start[size_t(rank)] = broadcasts;
    for (auto& [name, b] : model.named_buffers()) b.fill_(double(rank + 1));  // replicas drift apart
    ddp(batch_images(0, 2));
    per_forward[size_t(rank)] = broadcasts - at_start[size_t(rank)];
    for (auto& [name, b] : model.named_buffers())
      if (b.to(DType::f64).to_vector<double>() != std::vector<double>(size_t(b.numel()), 1.0)) differing[size_t(rank)] += name + " ";
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(at_start[size_t(r)], 1) << "rank " << r << ": weights and buffers at construction";
    EXPECT_EQ(per_forward[size_t(r)], 1) << "rank " << r << ": buffers before a forward";
    EXPECT_EQ(differing[size_t(r)], "") << "rank " << r << " kept its own statistics";
  }
}

// Mixed precision: a scaler attached to DDP skips a step on every rank when one rank overflowed.
TEST(Ddp, AttachedScalerSkipsOnEveryRankWhenOneOverflows) {
  std::vector<int> stepped(2, -1);
  std::vector<std::string> moved(2);
  test::run_rank_threads(2, [&](int rank, ProcessGroup& group) {
    Generator gen(0);
    nn::MiniResNet model(tiny(), gen);
    DistributedDataParallel ddp(model, group, {});
    nn::GradScaler scaler;
    agree_on_overflow(scaler, ddp.comm());
    nn::SGD sgd(model.named_parameters(), {0.1f, 0.f, 0.f, 0.f, false});
    scaler.backward(ops::cross_entropy(ddp(batch_images(rank * kPerRank, kPerRank)), batch_labels(0, kPerRank)));
    ddp.reducer().wait_for_gradients();
    // After the all-reduce, only rank 0's gradients overflow.
    if (rank == 0) model.named_parameters().front().second.grad().fill_(std::numeric_limits<double>::infinity());
    const std::vector<uint8_t> before = state_bytes(model);
    stepped[size_t(rank)] = scaler.step(sgd, 0.1) ? 1 : 0;
    if (state_bytes(model) != before) moved[size_t(rank)] = "weights changed";
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(stepped[size_t(r)], 0) << "rank " << r << " stepped although rank 0 overflowed";
    EXPECT_EQ(moved[size_t(r)], "") << "rank " << r;
  }
}

}  // namespace
}  // namespace cg::dist
