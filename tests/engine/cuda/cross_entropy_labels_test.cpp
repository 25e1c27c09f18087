// cross_entropy on the GPU with a label outside [0, classes): the kernel records it (no host
// synchronization of its own) and the host raises an error naming the op, the label and the row
// when it reads the loss, or at the next cross_entropy call if it never read. The CPU path checks
// before computing. Skips without a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/ops.h"
#include "engine/stream.h"
#include "support/gpu_ops.h"

namespace cg {
namespace {

using test::kGpu;

Tensor logits(int64_t n) { return test::randn({n, 10}, 3).to(kGpu); }
Tensor labels(const std::vector<int64_t>& v) { return Tensor::from_vector(v, {int64_t(v.size())}).to(kGpu); }

// Runs f, expecting an Error whose message has every one of `parts`.
template <typename F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(CudaCrossEntropyLabels, ABadLabelFailsWhenTheLossIsRead) {
  NEED_GPU();
  const Tensor loss = ops::cross_entropy(logits(4), labels({1, 12, 3, 4}));
  expect_error([&] { (void)loss.item(); }, {"cross_entropy", "label 12", "row 1", "[0, 10)"});
  // Reported once: a good batch afterwards computes as on the CPU.
  const Tensor cpu_logits = test::randn({4, 10}, 3);
  const std::vector<int64_t> good{1, 9, 0, 4};
  const double want = ops::cross_entropy(cpu_logits, Tensor::from_vector(good, {4})).item();
  EXPECT_NEAR(ops::cross_entropy(cpu_logits.to(kGpu), labels(good)).item(), want, 1e-5);
}

TEST(CudaCrossEntropyLabels, ANegativeLabelFailsAtTheNextCallIfTheLossIsNeverRead) {
  NEED_GPU();
  (void)ops::cross_entropy(logits(3), labels({0, -1, 2}));
  current_stream(kGpu).synchronize();  // the kernel has run; nothing was read
  expect_error([&] { (void)ops::cross_entropy(logits(3), labels({0, 1, 2})); },
               {"cross_entropy", "label -1", "row 1"});
}

TEST(CudaCrossEntropyLabels, TheCpuRefusesTheSameLabels) {
  const Tensor cpu_logits = test::randn({4, 10}, 3);
  expect_error([&] { (void)ops::cross_entropy(cpu_logits, Tensor::from_vector<int64_t>({1, 12, 3, 4}, {4})); },
               {"cross_entropy", "label 12", "row 1"});
}

}  // namespace
}  // namespace cg
