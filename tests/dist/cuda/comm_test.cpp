// The device transports on their own: single-rank NCCL all-reduce and broadcast of device tensors
// (the real NCCL path: its stream, events and watchdog), and the modeled backend occupying its
// communication stream for the modeled time while the data stays. With profiling on, each
// collective carries timing events and lands on the "communication stream" track. Skips without
// a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "dist/grad_compression.h"
#include "dist/gradient_comm.h"
#include "engine/runtime.h"
#include "kernels/cuda/device_info.h"
#include "support/need_gpu.h"
#include "support/one_rank_store.h"
#include "support/random_data.h"
#include "util/trace.h"

namespace cg::dist {
namespace {

const Device kGpu = Device::cuda(0);

// Profiling on for one test: collectives get timing events.
struct Profiling {
  Profiling() {
    trace::clear();
    trace::set_enabled(true);
  }
  ~Profiling() {
    trace::set_enabled(false);
    trace::clear();
  }
};

// The watchdog marks Works done from its own thread, shortly after the device finishes them.
void expect_done_soon(Work& work) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!work.done() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(work.done()) << "the watchdog never saw the collective complete";
}

TEST(CudaComm, SingleRankNcclAllReduceAndBroadcastOnDeviceTensors) {
  NEED_GPU();
  NEED_CUDA_LIBRARY("NCCL");
  Profiling profiling;
  TcpStore store = test::one_rank_store();
  auto comm = make_nccl_comm(store, 0, 1, kGpu, 60.0);
  const std::vector<float> values = test::random_vector<float>(3001, 21);
  Tensor t = Tensor::from_vector(values, {3001}).to(kGpu);
  const Stream s = current_stream(kGpu);
  auto work = comm->all_reduce_average(t, s, "test tensor");
  comm->wait(*work, s);
  EXPECT_EQ(t.to_vector<float>(), values);  // the average over one rank is the value itself
  comm->broadcast(t, s);
  EXPECT_EQ(t.to_vector<float>(), values);
  expect_done_soon(*work);
  ASSERT_TRUE(work->device_started.defined());
  EXPECT_GE(Event::elapsed_ms(work->device_started, work->device_done), 0.0f);
}

TEST(CudaComm, ModeledAllReduceOccupiesTheStreamForTheModeledTime) {
  NEED_GPU();
  Profiling profiling;
  const Link slow{"slow", 0.1, 0.0};  // 100 MB/s: 1 MB over 2 ranks = 10 ms
  auto comm = make_modeled_comm(2, slow, kGpu);
  const std::vector<float> values = test::random_vector<float>(250000, 22);
  Tensor t = Tensor::from_vector(values, {250000}).to(kGpu);
  const Stream s = current_stream(kGpu);
  auto work = comm->all_reduce_average(t, s, "test tensor");
  comm->wait(*work, s);
  EXPECT_EQ(t.to_vector<float>(), values);
  expect_done_soon(*work);
  EXPECT_NEAR(comm->modeled_ms(1'000'000), 10.0, 1e-9);
  ASSERT_TRUE(work->device_started.defined());
  const float ms = Event::elapsed_ms(work->device_started, work->device_done);
  EXPECT_GE(ms, 9.5f);
  EXPECT_LT(ms, 200.0f);
}

// dist.grad_compression on NCCL: the casts on the communication stream and ncclHalf /
// ncclBfloat16 sums. Over one rank the result is the gradient rounded to 16 bits (divided by 1,
// summed once), bit for bit; the modeled backend times the 16-bit bytes, half the float32 time.
TEST(CudaComm, SingleRankNcclCompressedAllReduceRoundsTo16Bits) {
  NEED_GPU();
  NEED_CUDA_LIBRARY("NCCL");
  TcpStore store = test::one_rank_store();
  auto transport = make_nccl_comm(store, 0, 1, kGpu, 60.0);
  ASSERT_NE(transport->wire16(), nullptr);
  const std::vector<float> values = test::random_vector<float>(3001, 23);
  for (DType dtype : {DType::f16, DType::bf16}) {
    auto comm = make_compressed_comm(*transport, dtype == DType::f16 ? GradCompression::fp16 : GradCompression::bf16);
    Tensor bucket = Tensor::from_vector(values, {3001}).to(kGpu);
    const Stream s = current_stream(kGpu);
    auto work = comm->all_reduce_average(bucket, s, "test bucket");
    comm->wait(*work, s);
    const std::vector<float> want = Tensor::from_vector(values, {3001}).to(dtype).to(DType::f32).to_vector<float>();
    EXPECT_EQ(bucket.to_vector<float>(), want) << dtype_name(dtype);
    EXPECT_NE(want, values);  // the rounding is visible, so the check can fail
    expect_done_soon(*work);
  }
}

// What an identity cannot show, made visible by the 16-bit rounding: the collective reads its
// bucket only after the compute stream's work before it (a spinning kernel, then a fill, then the
// collective: without the stream wait, NCCL would round the values from before the fill), and
// touches exactly its bucket (the floats on either side, in the same allocation, keep their bits).
TEST(CudaComm, SingleRankNcclCompressedAllReduceWaitsForComputeAndStaysInItsBucket) {
  NEED_GPU();
  NEED_CUDA_LIBRARY("NCCL");
  TcpStore store = test::one_rank_store();
  auto transport = make_nccl_comm(store, 0, 1, kGpu, 60.0);
  constexpr int64_t kMargin = 64, kCount = 3001;
  const std::vector<float> values = test::random_vector<float>(size_t(kCount + 2 * kMargin), 24);
  for (DType dtype : {DType::f16, DType::bf16}) {
    Tensor whole = Tensor::from_vector(values, {kCount + 2 * kMargin}).to(kGpu);
    Tensor bucket = whole.view_at(kMargin, {kCount});
    auto comm = make_compressed_comm(*transport, dtype == DType::f16 ? GradCompression::fp16 : GradCompression::bf16);
    const Stream s = current_stream(kGpu);
    runtime::spin(s, 50'000);      // 50 ms on the compute stream...
    bucket.fill_(1.0 / 3.0);       // ...then the bucket's final values
    auto work = comm->all_reduce_average(bucket, s, "test bucket");
    comm->wait(*work, s);
    const float third = Tensor::full({1}, 1.0 / 3.0).to(dtype).to(DType::f32).to_vector<float>()[0];
    ASSERT_NE(third, float(1.0 / 3.0));
    const std::vector<float> got = whole.to_vector<float>();
    std::vector<float> want = values;
    std::fill(want.begin() + kMargin, want.begin() + kMargin + kCount, third);
    EXPECT_EQ(got, want) << dtype_name(dtype) << ": the bucket rounded from its final values, its neighbours untouched";
    expect_done_soon(*work);
  }
}

TEST(CudaComm, ModeledCompressedAllReduceTakesHalfTheBandwidthTime) {
  NEED_GPU();
  NEED_REAL_GPU("the modeled transfer is timed in wall-clock time");
  Profiling profiling;
  const Link slow{"slow", 0.1, 0.0};  // 100 MB/s: 1 MB over 2 ranks = 10 ms, 0.5 MB = 5 ms
  auto transport = make_modeled_comm(2, slow, kGpu);
  auto comm = make_compressed_comm(*transport, GradCompression::fp16);
  Tensor bucket = Tensor::from_vector(test::random_vector<float>(250000, 24), {250000}).to(kGpu);
  const Stream s = current_stream(kGpu);
  auto work = comm->all_reduce_average(bucket, s, "test bucket");
  comm->wait(*work, s);
  expect_done_soon(*work);
  ASSERT_TRUE(work->device_started.defined());
  const float ms = Event::elapsed_ms(work->device_started, work->device_done);
  EXPECT_GE(ms, 4.7f);
  EXPECT_LT(ms, 9.0f);
}

}  // namespace
}  // namespace cg::dist
