// Sizes past what memory holds, with real trainer and launcher processes (issue 26). A size the
// config could not allow is refused before any work, naming the key and its bound (exit 2); a
// model whose keys are each in bounds but multiply past what a process can hold is refused by its
// parameter count; and an allocation that fails all the same is a clear error with exit 1, never
// std::terminate's abort.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/processes.h"

namespace cg {
namespace {
namespace fs = std::filesystem;

struct ProgramRun {
  int exit_code;
  std::string output;
};

ProgramRun run(const std::string& program, const std::string& args, const std::string& env = "") {
  const auto dir = test::make_temp_dir("fault_memory");
  const int rc =
      test::wait_for(test::start(env + test::app(program) + " " + args, dir / "log.txt"), std::chrono::seconds(120));
  return ProgramRun{rc, test::read_text(dir / "log.txt")};
}

// A run that would train in a second, if it came to that.
std::string tiny(const fs::path& out) {
  return "data.dataset=synthetic data.synthetic_size=64 data.image_size=8 data.batch_size=16 data.num_workers=0 "
         "model.in_channels=3 train.device=cpu train.threads=1 train.max_steps=1 output.dir=" + out.string();
}

void expect_no_crash(const ProgramRun& r) {
  EXPECT_EQ(r.output.find("terminate"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("check failed"), std::string::npos) << "an internal check, not a user's message\n" << r.output;
}

// The issue's config, in a YAML file and on the command line.
TEST(FaultMemory, TheIssuesBlocksAreRefusedNamingTheKeyAndItsBound) {
  const auto dir = test::make_temp_dir("fault_blocks");
  const fs::path yaml = dir / "blocks.yaml";
  std::ofstream(yaml) << "model:\n  blocks: [2, 2, 99999999999]\n";
  for (const std::string& how : {"--config " + yaml.string(), std::string("'model.blocks=[2,2,99999999999]'")}) {
    const ProgramRun r = run("cudagrad-train", tiny(dir / "out") + " " + how);
    EXPECT_EQ(r.exit_code, 2) << how << "\n" << r.output;
    EXPECT_NE(r.output.find("config key 'model.blocks': value '[2, 2, 99999999999]' is out of range (allowed: [1, 256])"),
              std::string::npos) << r.output;
    expect_no_crash(r);
    EXPECT_FALSE(fs::exists(dir / "out")) << "a refused run wrote output";
  }
  EXPECT_NE(run("cudagrad-train", tiny(dir / "out") + " --config " + yaml.string()).output.find(yaml.string() + ":2"),
            std::string::npos);
}

// Widths and blocks each in bounds: 4096 channels, 16 blocks a stage make 9.7e9 parameters.
TEST(FaultMemory, AModelTooLargeToHoldIsRefusedByItsParameterCount) {
  const auto dir = test::make_temp_dir("fault_params");
  const ProgramRun r = run("cudagrad-train", tiny(dir / "out") + " 'model.widths=[4096,4096]' 'model.blocks=[16,16]'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("config key 'model.widths': model.widths (command line), model.blocks (command line) and "
                          "model.num_classes (default) make a model of 9.681e+09 parameters"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("over the limit of 1073741824 parameters"), std::string::npos) << r.output;
  expect_no_crash(r);
}

// Every key in bounds, but what they ask for cannot be allocated (Linux refuses outright a request
// beyond memory and swap together). Honest failures, no test hook: std::bad_alloc from the
// allocator itself, at three places. The trainer's estimate of the data's host memory refuses
// these configs first (exit 2, TrainCli.DataThatCannotFitInMemoryIsRefusedNamingTheKeys); its
// escape hatch lets them through to the allocations, as a config it underestimates would get.
const std::string kNoEstimate = "env CUDAGRAD_NO_MEMORY_ESTIMATE=1 ";
TEST(FaultMemory, AnAllocationFailureExitsOneNamingTheCause) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's allocator reports a failed allocation and stops the process instead of throwing";
#endif
  const auto dir = test::make_temp_dir("fault_oom");
  const std::string sizes = "the config asks for model.widths=[4], model.blocks=[1], model.num_classes=";
  // At setup, on the main thread: the synthetic set's class templates, a million classes of
  // 3x4096x4096 floats (211 TB). std::bad_alloc itself reaches the trainer's main.
  ProgramRun r = run("cudagrad-train", tiny(dir / "templates") + " data.image_size=4096 model.num_classes=1048576 "
                                                                 "'model.widths=[4]' 'model.blocks=[1]'", kNoEstimate);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("error: out of memory: an allocation failed (std::bad_alloc); " + sizes + "1048576"),
            std::string::npos) << r.output;
  expect_no_crash(r);
  // The first batch, 65536 images of 4096x4096 floats (4.4 TB), loaded on the training thread
  // (num_workers=0) or on a loader thread, which hands the failure over. Two classes of one
  // channel keep the templates at 128 MB.
  for (const char* workers : {"0", "2"}) {
    r = run("cudagrad-train", tiny(dir / ("batch" + std::string(workers))) +
                                  " data.image_size=4096 data.batch_size=65536 data.synthetic_size=65536 "
                                  "model.in_channels=1 model.num_classes=2 'model.widths=[4]' 'model.blocks=[1]' "
                                  "data.num_workers=" + workers, kNoEstimate);
    EXPECT_EQ(r.exit_code, 1) << "num_workers " << workers << "\n" << r.output;
    EXPECT_NE(r.output.find("error: data loader: loading batch 0 failed: out of memory (std::bad_alloc); " + sizes +
                            "2, data.batch_size=65536"),
              std::string::npos) << r.output;
    expect_no_crash(r);
  }
}

TEST(FaultMemory, TheLauncherRefusesRankCountsPastItsBound) {
  for (const std::string option : {"--nproc-per-node 100000", "--nnodes 100000 --node-rank 0"}) {
    const ProgramRun r = run("cudagrad-launch", option + " /bin/true");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(option.substr(0, option.find(' '))), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("must be in [1, "), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace cg
