// cudagrad-train as a program: bad input exits with the documented code and a message naming the
// cause, before any work starts; a short real run writes metrics.jsonl, config.yaml and a
// checkpoint.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kernels/cuda/device_info.h"
#include "support/paths.h"

namespace cg {
namespace {

struct ProgramRun {
  int exit_code;
  std::string output;
};

ProgramRun run_train(const std::string& args) {
  const auto dir = test::make_temp_dir("cli_out");
  const auto log = dir / "log.txt";
  const std::string cmd = (test::binary_dir() / "apps" / "cudagrad-train").string() + " " + args +
                          " > " + log.string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str()};
}

std::string config(const std::string& name) { return (test::source_dir() / "configs" / name).string(); }

TEST(TrainCli, UnknownKeyExitsTwoNamingIt) {
  ProgramRun r = run_train("--config " + config("fashion_mnist_cpu.yaml") + " optim.lrr=0.1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("optim.lrr"), std::string::npos) << r.output;
}

TEST(TrainCli, WrongTypeAndRangeExitTwo) {
  ProgramRun r = run_train("--config " + config("fashion_mnist_cpu.yaml") + " data.batch_size=abc");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("data.batch_size"), std::string::npos) << r.output;
  r = run_train("--config " + config("fashion_mnist_cpu.yaml") + " train.epochs=-1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("train.epochs"), std::string::npos) << r.output;
}

TEST(TrainCli, UnknownKeyInFileNamesFileAndLine) {
  const auto dir = test::make_temp_dir("cli_yaml");
  const auto path = dir / "bad.yaml";
  std::ofstream(path) << "optim:\n  lr: 0.1\n  momentom: 0.9\n";
  ProgramRun r = run_train("--config " + path.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("optim.momentom"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("bad.yaml:3"), std::string::npos) << r.output;
}

TEST(TrainCli, UnreadableConfigAndMissingDataAreClear) {
  ProgramRun r = run_train("--config /nonexistent/config.yaml");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("/nonexistent/config.yaml"), std::string::npos) << r.output;
  const auto out = test::make_temp_dir("cli_missing");
  r = run_train("--config " + config("fashion_mnist_cpu.yaml") + " data.path=/nonexistent/fmnist output.dir=" +
                out.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("/nonexistent/fmnist"), std::string::npos) << r.output;
}

TEST(TrainCli, SettingsThatNeedTheGpuAreRefusedWithoutOne) {
  if (kernels::cuda::device_count() > 0) GTEST_SKIP() << "a GPU is visible: these settings are valid here";
  for (const char* setting : {"amp.enabled=true", "dist.backend=nccl", "train.device=cuda"}) {
    const auto out = test::make_temp_dir("cli_gpu");
    ProgramRun r = run_train(std::string("data.dataset=synthetic data.synthetic_size=64 data.image_size=8 "
                                         "model.in_channels=3 model.widths=[4] model.blocks=[1] output.dir=") +
                             out.string() + " " + setting);
    EXPECT_NE(r.exit_code, 0) << setting << "\n" << r.output;
    const std::string key = std::string(setting).substr(0, std::string(setting).find('='));
    EXPECT_NE(r.output.find(key), std::string::npos) << r.output;
  }
}

TEST(TrainCli, HelpListsEveryKey) {
  ProgramRun r = run_train("--help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* key : {"model.widths", "data.batch_size", "optim.lr", "sched.warmup_steps",
                          "train.grad_accum_steps", "amp.dtype", "checkpoint.resume_from",
                          "dist.bucket_cap_mb", "output.dir", "profile.enabled"})
    EXPECT_NE(r.output.find(key), std::string::npos) << key;
}

TEST(TrainCli, ShortRunWritesMetricsConfigAndCheckpoint) {
  const auto out = test::make_temp_dir("cli_run");
  ProgramRun r = run_train(
      "data.dataset=synthetic data.synthetic_size=128 data.image_size=8 data.batch_size=16 "
      "model.in_channels=3 model.widths=[4,8] model.blocks=[1,1] train.epochs=2 train.log_interval=2 "
      "train.device=cpu output.dir=" + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(out / "config.yaml"));
  EXPECT_TRUE(std::filesystem::exists(out / "checkpoints" / "last.safetensors"));
  std::ifstream metrics(out / "metrics.jsonl");
  std::string line;
  int train_lines = 0, eval_lines = 0;
  while (std::getline(metrics, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["kind"] == "event") continue;
    for (const char* k : {"kind", "epoch", "step", "loss", "accuracy", "lr", "images_per_s"})
      EXPECT_TRUE(j.contains(k)) << k << " missing in " << line;
    (j["kind"] == "train" ? train_lines : eval_lines)++;
  }
  EXPECT_GT(train_lines, 0);
  EXPECT_EQ(eval_lines, 2);

  // model.init_from starts a new run from those weights (here in a channels-last model: the
  // weights do not depend on the layout); a file without the model's keys fails.
  const auto out2 = test::make_temp_dir("cli_init");
  r = run_train("data.dataset=synthetic data.synthetic_size=64 data.image_size=8 data.batch_size=16 "
                "model.in_channels=3 model.widths=[4,8] model.blocks=[1,1] train.epochs=1 train.device=cpu "
                "model.channels_last=true model.init_from=" + (out / "checkpoints" / "last.safetensors").string() + " output.dir=" + out2.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = run_train("data.dataset=synthetic data.image_size=8 model.in_channels=3 model.widths=[4,16] "
                "model.blocks=[1,1] train.device=cpu model.init_from=" +
                (out / "checkpoints" / "last.safetensors").string() + " output.dir=" + out2.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("shape"), std::string::npos) << r.output;
}

TEST(TrainCli, TargetAccuracyStopsAtTheFirstEvaluationThatReachesIt) {
  const auto out = test::make_temp_dir("cli_target");
  ProgramRun r = run_train(
      "data.dataset=synthetic data.synthetic_size=64 data.image_size=8 data.batch_size=16 model.in_channels=3 "
      "model.widths=[4] model.blocks=[1] train.epochs=5 train.device=cpu train.target_accuracy=0.01 output.dir=" +
      out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream metrics(out / "metrics.jsonl");
  std::string line;
  int evals = 0, reached = 0;
  while (std::getline(metrics, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["kind"] == "eval") ++evals;
    if (j.value("event", "") == "target_reached") {
      ++reached;
      EXPECT_GT(j["seconds_since_start"].get<double>(), 0.0) << line;
      EXPECT_GE(j["accuracy"].get<double>(), 0.01) << line;
    }
  }
  EXPECT_EQ(evals, 1) << "training stops after the first evaluation at or above the target";
  EXPECT_EQ(reached, 1);
  EXPECT_TRUE(std::filesystem::exists(out / "checkpoints" / "last.safetensors"));
}

TEST(BenchCli, MeasuresTheTrainingStepAndPrintsJsonLast) {
  const auto dir = test::make_temp_dir("bench_out");
  const std::string cmd = (test::binary_dir() / "apps" / "cudagrad-bench").string() +
                          " --warmup 1 --steps 3 data.batch_size=4 data.image_size=8 model.widths=[4,8] "
                          "model.blocks=[1,1] train.device=cpu > " + (dir / "log.txt").string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream in(dir / "log.txt");
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << last;
  const auto j = nlohmann::json::parse(last);
  EXPECT_EQ(j["bench"], "cudagrad");
  EXPECT_GT(j["images_per_s"].get<double>(), 0.0);
  for (const char* k : {"step_ms_median", "forward_ms", "backward_ms", "comm_exposed_ms", "optimizer_ms", "peak_mem_bytes"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_GT(j["peak_mem_bytes"].get<double>(), 0.0);
}

}  // namespace
}  // namespace cg
