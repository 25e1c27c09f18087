// CUDAGRAD_CUDA_SYNC=1 (synchronize after every kernel launch, to pin an asynchronous fault on its
// launch) must leave CUDA-graph captures alone: a device synchronization inside a capture
// invalidates it. This executable turns the switch on before any launch, then captures and
// replays ops, and checks eager launches still report their errors at once. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "engine/cuda_graph.h"
#include "engine/ops.h"
#include "kernels/cuda/graph.h"
#include "support/gpu_ops.h"

namespace cg {
namespace {

// Before main: the launch check reads the switch once, at the first launch.
const bool kSyncAfterEveryLaunch = [] { return ::setenv("CUDAGRAD_CUDA_SYNC", "1", 1) == 0; }();

TEST(CudaSyncDebug, CaptureAndReplayWorkWithSyncAfterEveryLaunch) {
  ASSERT_TRUE(kSyncAfterEveryLaunch);
  NEED_GPU();
  const Device gpu = Device::cuda(0);
  const Stream stream = Stream::create(gpu);
  StreamGuard on_stream(stream);
  Tensor x = Tensor::full({4096}, 1.0, DType::f32, gpu);
  auto work = [&] { return ops::relu(ops::add(ops::scale(x, 2.0), x)); };  // 3x, kernels only
  const std::vector<float> eager = test::host_f32(work());  // eager launches synchronize (switch on)
  EXPECT_EQ(eager.front(), 3.0f);

  CudaGraph graph(stream);
  Tensor y;
  EXPECT_NO_THROW(graph.capture([&] {
    EXPECT_TRUE(kernels::cuda::any_capture_in_progress());
    y = work();
  })) << "a synchronization after a captured launch invalidated the capture";
  ASSERT_TRUE(graph.captured());
  EXPECT_FALSE(kernels::cuda::any_capture_in_progress());
  for (double value : {2.0, -1.0}) {
    x.fill_(value);
    graph.replay();
    const std::vector<float> got = test::host_f32(y);
    EXPECT_EQ(got.front(), float(std::max(3.0 * value, 0.0))) << value;
  }
  // After the capture, eager launches synchronize again: the same ops still give the same values.
  x.fill_(1.0);
  EXPECT_EQ(test::host_f32(work()), eager);
}

}  // namespace
}  // namespace cg
