// train.cuda_graph: auto by default (captured on a GPU wherever the run allows, eager otherwise,
// saying why), true with the settings a captured step can hold and refused, naming train.cuda_graph
// and the conflicting key, with the ones it cannot (the CPU, Gloo, gradient accumulation, profiling,
// ZeRO-1); without a GPU, cudagrad-train refuses true before any work (exit 2).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include "train/step.h"
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

TEST(CudaGraphConfig, AutoByDefaultAndTrueWithCapturableSettings) {
  EXPECT_EQ(load_train_config("", {}).train.cuda_graph, CudaGraphMode::automatic);
  EXPECT_EQ(load_train_config("", {"train.cuda_graph=false"}).train.cuda_graph, CudaGraphMode::off);
  for (const char* backend : {"auto", "nccl", "modeled"}) {
    const TrainConfig c = load_train_config(
        "", {"train.cuda_graph=true", "train.device=cuda", std::string("dist.backend=") + backend, "amp.enabled=true"});
    EXPECT_EQ(c.train.cuda_graph, CudaGraphMode::on) << backend;
  }
  EXPECT_NE(to_yaml(load_train_config("", {"train.cuda_graph=true"})).find("cuda_graph: true"), std::string::npos);
  EXPECT_NE(to_yaml(load_train_config("", {})).find("cuda_graph: auto"), std::string::npos);
}

struct Conflict {
  std::string setting, key, reason;
};
const std::vector<Conflict> kConflicts = {{"train.device=cpu", "train.device", "need a GPU"},
                                          {"dist.backend=gloo", "dist.backend", "host code"},
                                          {"train.grad_accum_steps=4", "train.grad_accum_steps", "one micro-batch"},
                                          {"profile.enabled=true", "profile.enabled", "profile"},
                                          {"dist.sharding=optimizer", "dist.sharding", "after the first step"}};

TEST(CudaGraphConfig, TrueRefusesWhatCannotBeCapturedNamingBothKeys) {
  for (const Conflict& k : kConflicts) {
    SCOPED_TRACE(k.setting);
    test::expect_mentions(error_of({"train.cuda_graph=true", k.setting}), {"train.cuda_graph", k.key, k.reason});
    EXPECT_EQ(error_of({"train.cuda_graph=false", k.setting}), "");
    EXPECT_EQ(error_of({"train.cuda_graph=auto", k.setting}), "") << "auto runs such a step eagerly";
  }
}

TEST(CudaGraphConfig, AutoCapturesOnAGpuUnlessTheRunHoldsHostWork) {
  const GraphDecision plain = decide_cuda_graph(load_train_config("", {}), /*on_gpu=*/true, "nccl");
  EXPECT_TRUE(plain.capture);
  EXPECT_EQ(plain.why_not, "");
  for (const Conflict& k : kConflicts) {
    if (k.key == "train.device") continue;  // a CPU run is the case below
    SCOPED_TRACE(k.setting);
    const GraphDecision d = decide_cuda_graph(load_train_config("", {k.setting}), true, "nccl");
    EXPECT_FALSE(d.capture);
    test::expect_mentions(d.why_not, {k.key, k.reason});
  }
  // dist.backend=auto chose Gloo at run time (ranks sharing a GPU): only the transport's name says so.
  const GraphDecision staged = decide_cuda_graph(load_train_config("", {}), true, "gloo (staged through host memory)");
  EXPECT_FALSE(staged.capture);
  test::expect_mentions(staged.why_not, {"gloo", "share a GPU"});
  EXPECT_FALSE(decide_cuda_graph(load_train_config("", {}), /*on_gpu=*/false, "").capture);
  EXPECT_EQ(decide_cuda_graph(load_train_config("", {}), false, "").why_not, "") << "a CPU run says nothing of graphs";
  EXPECT_FALSE(decide_cuda_graph(load_train_config("", {"train.cuda_graph=false"}), true, "nccl").capture);
  // true insists: a transport found at run time that a graph cannot hold is an error, not a fallback.
  EXPECT_THROW(decide_cuda_graph(load_train_config("", {"train.cuda_graph=true", "train.device=cuda"}), true, "gloo"),
               UsageError);
  EXPECT_TRUE(decide_cuda_graph(load_train_config("", {"train.cuda_graph=true", "train.device=cuda"}), true, "nccl")
                  .capture);
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
