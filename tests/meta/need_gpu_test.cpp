// NEED_GPU (tests/support/need_gpu.h) on a machine without a GPU: a skip, or with
// CUDAGRAD_REQUIRE_GPU=1 a failure, in process and for a real GPU test executable run as the GPU
// check runs it. On a machine with a GPU there is nothing to check: it skips, saying so.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "support/need_gpu.h"
#include "support/paths.h"

namespace cg::test {
namespace {

// Sets or clears CUDAGRAD_REQUIRE_GPU for one scope.
struct RequireGpu {
  explicit RequireGpu(const char* value) {
    if (const char* old = std::getenv("CUDAGRAD_REQUIRE_GPU")) saved_ = old, had_ = true;
    if (value) ::setenv("CUDAGRAD_REQUIRE_GPU", value, 1);
    else ::unsetenv("CUDAGRAD_REQUIRE_GPU");
  }
  ~RequireGpu() {
    if (had_) ::setenv("CUDAGRAD_REQUIRE_GPU", saved_.c_str(), 1);
    else ::unsetenv("CUDAGRAD_REQUIRE_GPU");
  }
  std::string saved_;
  bool had_ = false;
};

TEST(NeedGpu, RequireGpuIsOnForAnyValueButEmptyAndZero) {
  { RequireGpu r(nullptr); EXPECT_FALSE(gpu_required()); }
  { RequireGpu r(""); EXPECT_FALSE(gpu_required()); }
  { RequireGpu r("0"); EXPECT_FALSE(gpu_required()); }
  { RequireGpu r("1"); EXPECT_TRUE(gpu_required()); }
  { RequireGpu r("yes"); EXPECT_TRUE(gpu_required()); }
}

void need_gpu_here() { NEED_GPU(); }

TEST(NeedGpu, FailsWithoutAGpuWhenOneIsRequired) {
  if (gpu_visible()) GTEST_SKIP() << "checks the no-GPU behaviour; this machine has a GPU";
  RequireGpu r("1");
  EXPECT_FATAL_FAILURE(need_gpu_here(), "CUDAGRAD_REQUIRE_GPU is set");
}

struct ProgramRun {
  int exit_code;
  std::string output;
};

ProgramRun run(const std::string& cmd) {
  const auto log = make_temp_dir("need_gpu") / "log.txt";
  const int status = std::system((cmd + " > " + log.string() + " 2>&1").c_str());
  std::stringstream ss;
  ss << std::ifstream(log).rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str()};
}

TEST(NeedGpu, AGpuTestExecutableSkipsOrWithRequireGpuFails) {
  if (gpu_visible()) GTEST_SKIP() << "checks the no-GPU behaviour; this machine has a GPU";
  if (!kernels::kCudaBuild) GTEST_SKIP() << "a build without the CUDA backend has no GPU test executables";
  const std::string exe = (binary_dir() / "tests" / "kernels_cuda_device_test").string();
  ProgramRun r = run("env -u CUDAGRAD_REQUIRE_GPU " + exe);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[  SKIPPED ]"), std::string::npos) << r.output;
  r = run("env CUDAGRAD_REQUIRE_GPU=1 " + exe);
  EXPECT_NE(r.exit_code, 0) << "a required GPU that is missing must fail the run\n" << r.output;
  EXPECT_NE(r.output.find("CUDAGRAD_REQUIRE_GPU is set"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("[  SKIPPED ]"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace cg::test
