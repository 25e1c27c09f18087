// CudaGraph on a GPU: ops captured once replay on new input values written in place; what the
// capture allocates comes from the graph's private pool, what is allocated outside it never does;
// replays allocate nothing; after a warm-up the capture allocates nothing either; a capture that
// throws leaves the stream usable. Skips without a GPU.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "engine/cuda_graph.h"
#include "engine/device_allocator.h"
#include "engine/ops.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/graph.h"
#include "support/gpu_ops.h"

namespace cg {
namespace {

std::vector<float> host(const Tensor& t) { return test::host_f32(t); }

TEST(CudaGraph, ReplaysOnNewInputsFromItsOwnPool) {
  NEED_GPU();
  const Device gpu = Device::cuda(0);
  const Stream stream = Stream::create(gpu);
  StreamGuard on_stream(stream);
  CachingAllocator& allocator = allocator_for(gpu);
  Tensor x = Tensor::full({4096}, 1.0, DType::f32, gpu);  // an input: allocated before the capture
  auto work = [&] { return ops::relu(ops::add(ops::scale(x, 2.0), x)); };  // 3x, by temporaries
  const std::vector<float> eager = host(work());

  CudaGraph graph(stream);
  Tensor y;
  graph.capture([&] { y = work(); });
  EXPECT_NE(allocator.pool_of(y.raw_data()), 0u) << "the output of the capture comes from the graph's pool";
  EXPECT_EQ(allocator.pool_of(x.raw_data()), 0u);
  const PoolStats after_capture = graph.pool_stats();
  EXPECT_GT(after_capture.reserved_bytes, after_capture.in_use_bytes) << "the temporaries went back to the pool";

  const size_t backend_calls = allocator.stats().backend_allocations;
  for (double value : {1.0, 5.0, -2.0}) {
    x.fill_(value);
    graph.replay();
    const std::vector<float> got = host(y);
    EXPECT_EQ(got.front(), float(std::max(3.0 * value, 0.0))) << value;
    EXPECT_EQ(got.back(), got.front());
  }
  x.fill_(1.0);
  graph.replay();
  EXPECT_EQ(host(y), eager);
  EXPECT_EQ(allocator.stats().backend_allocations, backend_calls) << "a replay allocates nothing";
  // Allocations outside the capture, of the very sizes the capture freed, never get pool blocks.
  for (int i = 0; i < 4; ++i) {
    Tensor t = Tensor::empty({4096}, DType::f32, gpu);
    EXPECT_EQ(allocator.pool_of(t.raw_data()), 0u);
  }
  EXPECT_EQ(graph.pool_stats().reserved_bytes, after_capture.reserved_bytes);
}

// A warm-up run of the same work leaves its blocks in the graph's pool, so the capture reaches
// cudaMalloc not once; without it, every temporary of the capture does.
TEST(CudaGraph, CaptureAfterAWarmUpAllocatesNothingFromTheDevice) {
  NEED_GPU();
  const Device gpu = Device::cuda(0);
  const Stream stream = Stream::create(gpu);
  StreamGuard on_stream(stream);
  Tensor x = Tensor::full({3000}, 1.0, DType::f32, gpu);  // a size no other test caches
  auto work = [&] { return ops::relu(ops::add(ops::scale(x, 2.0), ops::scale(x, -4.0))); };
  Tensor y;
  {
    CudaGraph cold(stream);
    cold.capture([&] { y = work(); });
    EXPECT_GE(cold.backend_allocations_in_capture(), 3u) << "a fresh pool has no block to give";
  }
  CudaGraph warm(stream);
  std::vector<float> eager;
  warm.warm_up([&] { eager = host(work()); });
  warm.capture([&] { y = work(); });
  EXPECT_EQ(warm.backend_allocations_in_capture(), 0u);
  x.fill_(-1.0);
  warm.replay();
  EXPECT_EQ(host(y).front(), 2.0f) << "relu(-2 + 4)";
  x.fill_(1.0);
  warm.replay();
  EXPECT_EQ(host(y), eager);
}

TEST(CudaGraph, AThrowingCaptureLeavesTheStreamUsable) {
  NEED_GPU();
  const Device gpu = Device::cuda(0);
  const Stream stream = Stream::create(gpu);
  StreamGuard on_stream(stream);
  Tensor x = Tensor::full({16}, 2.0, DType::f32, gpu);
  {
    CudaGraph graph(stream);
    EXPECT_THROW(graph.capture([&] {
      Tensor t = ops::scale(x, 3.0);
      throw std::runtime_error("fails mid-capture");
    }),
                 std::runtime_error);
    EXPECT_FALSE(graph.captured());
    EXPECT_FALSE(kernels::cuda::stream_is_capturing(stream.handle()));
  }
  EXPECT_EQ(host(ops::scale(x, 3.0)).front(), 6.0f);
}

}  // namespace
}  // namespace cg
