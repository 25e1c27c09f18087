// train.cuda_graph: off by default, on with the settings a captured step can hold, and refused,
// naming train.cuda_graph and the conflicting key, with the ones it cannot (the CPU, Gloo, gradient
// accumulation, profiling); without a GPU, cudagrad-train refuses it before any work (exit 2).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include "train/train_config.h"
#include "support/messages.h"
#include "support/need_gpu.h"
#include "support/paths.h"
#include "util/check.h"

namespace cg::train {
namespace {

std::string error_of(const std::vector<std::string>& overrides) {
  try {
    load_train_config("", overrides);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(CudaGraphConfig, OffByDefaultAndOnWithCapturableSettings) {
  EXPECT_FALSE(load_train_config("", {}).train.cuda_graph);
  for (const char* backend : {"auto", "nccl", "modeled"}) {
    const TrainConfig c = load_train_config(
        "", {"train.cuda_graph=true", "train.device=cuda", std::string("dist.backend=") + backend, "amp.enabled=true"});
    EXPECT_TRUE(c.train.cuda_graph) << backend;
  }
  EXPECT_NE(to_yaml(load_train_config("", {"train.cuda_graph=true"})).find("cuda_graph: true"), std::string::npos);
}

TEST(CudaGraphConfig, RefusesWhatCannotBeCapturedNamingBothKeys) {
  struct Case {
    std::string conflicting, other_key, reason;
  };
  for (const Case& k : {Case{"train.device=cpu", "train.device", "need a GPU"},
                        Case{"dist.backend=gloo", "dist.backend", "host code"},
                        Case{"train.grad_accum_steps=4", "train.grad_accum_steps", "one micro-batch"},
                        Case{"profile.enabled=true", "profile.enabled", "profile"},
                        Case{"optim.zero_sharding=true", "optim.zero_sharding", "after the first step"}}) {
    SCOPED_TRACE(k.conflicting);
    test::expect_mentions(error_of({"train.cuda_graph=true", k.conflicting}),
                          {"train.cuda_graph", k.other_key, k.reason});
    EXPECT_EQ(error_of({"train.cuda_graph=false", k.conflicting}), "");
  }
}

TEST(CudaGraphConfig, TrainerRefusesItWithoutAGpuBeforeAnyWork) {
  if (test::gpu_visible()) GTEST_SKIP() << "a GPU is visible: train.cuda_graph is valid here";
  const auto dir = test::make_temp_dir("cuda_graph_cli");
  const auto log = dir / "log.txt";
  const std::string cmd = (test::binary_dir() / "apps" / "cudagrad-train").string() +
                          " data.dataset=synthetic data.synthetic_size=64 data.image_size=8 model.in_channels=3"
                          " model.widths=[4] model.blocks=[1] train.cuda_graph=true output.dir=" +
                          (dir / "out").string() + " > " + log.string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::stringstream output;
  output << std::ifstream(log).rdbuf();
  ASSERT_TRUE(WIFEXITED(status)) << output.str();
  EXPECT_EQ(WEXITSTATUS(status), 2) << output.str();
  test::expect_mentions(output.str(), {"train.cuda_graph", "needs a GPU"});
  EXPECT_FALSE(std::filesystem::exists(dir / "out" / "metrics.jsonl")) << "it started training";
}

}  // namespace
}  // namespace cg::train
