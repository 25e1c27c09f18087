// cudagrad-train as a program: bad input exits with the documented code and a message naming the
// cause, before any work starts; a short real run writes metrics.jsonl, config.yaml and a
// checkpoint.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/need_gpu.h"
#include "support/paths.h"
#include "support/processes.h"

namespace cg {
namespace {

struct ProgramRun {
  int exit_code;
  std::string output;
};

ProgramRun run_program(const std::string& program, const std::string& args) {
  const auto dir = test::make_temp_dir("cli_out");
  const auto log = dir / "log.txt";
  const std::string cmd = (test::binary_dir() / "apps" / program).string() + " " + args +
                          " > " + log.string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  const ProgramRun r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str()};
  test::expect_no_sanitizer_report(r.exit_code, r.output, "cudagrad-train " + args);  // exit 1 expected or not
  return r;
}

ProgramRun run_train(const std::string& args) { return run_program("cudagrad-train", args); }
ProgramRun run_bench(const std::string& args) { return run_program("cudagrad-bench", args); }

int count_of(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
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

// A tiny synthetic run (64 training images) writing into `out`.
std::string tiny_run(const std::filesystem::path& out) {
  return "data.dataset=synthetic data.synthetic_size=64 data.image_size=8 model.in_channels=3 model.widths=[4] "
         "model.blocks=[1] train.max_steps=1 train.device=cpu output.dir=" + out.string();
}

TEST(TrainCli, AnEmptyConfigFileExitsTwoNamingIt) {
  const auto path = test::make_temp_dir("cli_empty") / "empty.yaml";
  std::ofstream(path) << "\n";
  const ProgramRun r = run_train("--config " + path.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("config file " + path.string() + " is empty"), std::string::npos) << r.output;
}

// drop_last leaves a rank no batch at all: a config that does not fit the data, refused before
// any output is written. Two ranks of 32 of the 64 images each with batches of 40 (one process
// with a batch larger than the synthetic set is refused earlier, by the config's own rules).
TEST(TrainCli, ABatchLargerThanARanksShareExitsTwoWritingNothing) {
  const auto dir = test::make_temp_dir("cli_batch");
  const auto out = dir / "out";
  const std::string cmd = (test::binary_dir() / "apps" / "cudagrad-launch").string() +
                          " --standalone --nproc-per-node 2 " +
                          (test::binary_dir() / "apps" / "cudagrad-train").string() + " " + tiny_run(out) +
                          " data.batch_size=40 dist.timeout_s=30 > " + (dir / "log.txt").string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  const std::string log = test::read_text(dir / "log.txt");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << log;
  test::expect_no_sanitizer_report(WIFEXITED(status) ? WEXITSTATUS(status) : -1, log, "cudagrad-launch");
  EXPECT_NE(log.find("error: data.batch_size=40 is larger than the 32 training images each of the 2 ranks reads"),
            std::string::npos) << log;
  EXPECT_NE(log.find("failed first (exit code 2)"), std::string::npos) << log;
  EXPECT_EQ(log.find("check failed"), std::string::npos) << "an internal check, not a user's message\n" << log;
  EXPECT_FALSE(std::filesystem::exists(out)) << "a refused run left " << out;
}

// Issue 38: a synthetic set whose class templates fit the address space but not the machine was
// granted by overcommit, then the process was killed touching it. Now refused at start, naming
// the keys, the need and what the machine has (1,048,576 classes of 3x4096x4096 float32 images:
// 384 TiB).
TEST(TrainCli, DataThatCannotFitInMemoryIsRefusedNamingTheKeys) {
  const auto dir = test::make_temp_dir("cli_memory");
  const ProgramRun r = run_train(tiny_run(dir / "out") + " data.image_size=4096 model.num_classes=1048576");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  for (const char* part : {"model.num_classes=1048576", "data.image_size=4096", "GiB of host memory, but this machine has",
                           "lower data.image_size"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << "\n" << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "out")) << "a refused run left its output folder";
}

// A file where a folder must go fails at start-up naming the key, not after an epoch of training.
TEST(TrainCli, AnOutputOrCheckpointFolderThatIsAFileFailsBeforeTraining) {
  const auto dir = test::make_temp_dir("cli_dirs");
  const auto file = dir / "a_file";
  std::ofstream(file) << "x";
  for (const std::string key : {"output.dir", "checkpoint.dir"}) {
    const auto out = dir / ("out_" + key);
    const std::string args = key == "output.dir" ? tiny_run(file) : tiny_run(out) + " checkpoint.dir=" + file.string();
    const ProgramRun r = run_train(args);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(key + ": cannot create the folder " + file.string()), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("step 1"), std::string::npos) << "trained before failing\n" << r.output;
  }
}

// PyTorch scripts take `--epochs 3`; the error names the key=value meant.
TEST(TrainCli, AnOptionForAConfigKeyNamesTheKey) {
  ProgramRun r = run_train("--epochs 3");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown option --epochs: config keys are set as key=value, here train.epochs=3"),
            std::string::npos) << r.output;
  r = run_train("--batch-size=64");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("here data.batch_size=64"), std::string::npos) << r.output;
  r = run_train("--no-such-thing");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("unknown option --no-such-thing"), std::string::npos) << r.output;
}

// A checkpoint to resume that is missing, or a folder that is no complete sharded checkpoint (no
// index.json): named before the data is read or any output written.
TEST(TrainCli, AMissingCheckpointToResumeFailsBeforeAnyWork) {
  const auto dir = test::make_temp_dir("cli_resume_missing");
  for (const auto& [from, why] : {std::pair{dir / "nope.safetensors", std::string("no such file")},
                                  std::pair{dir, std::string("a folder without index.json: neither a checkpoint file nor a complete "
                                                              "sharded checkpoint")}}) {
    const ProgramRun r = run_train(tiny_run(dir / "out") + " checkpoint.resume_from=" + from.string());
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("checkpoint.resume_from=" + from.string() + ": " + why), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("data: "), std::string::npos) << "the data was read first\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "out")) << r.output;
  }
}

// Resuming a checkpoint of another model or optimizer: one sentence naming the cause, without an
// internal check's condition and source line.
TEST(TrainCli, ACheckpointOfAnotherModelOrOptimizerIsRefusedInPlainWords) {
  const auto dir = test::make_temp_dir("cli_other_ckpt");
  ProgramRun r = run_train(tiny_run(dir / "first"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string resume = " checkpoint.resume_from=" + (dir / "first" / "checkpoints" / "last.safetensors").string();
  r = run_train(tiny_run(dir / "wider") + resume + " model.widths=[8]");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("state dict key 'conv1.weight': shape [4, 3, 3, 3] does not match the model's [8, 3, 3, 3]"),
            std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("check failed"), std::string::npos) << r.output;
  r = run_train(tiny_run(dir / "adamw") + resume + " optim.name=adamw");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("was written by optimizer 'sgd', config says optim.name=adamw"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("check failed"), std::string::npos) << r.output;
}

TEST(TrainCli, SettingsThatNeedTheGpuAreRefusedWithoutOne) {
  if (test::gpu_visible()) GTEST_SKIP() << "a GPU is visible: these settings are valid here";
  for (const char* setting : {"amp.enabled=true", "dist.backend=nccl", "train.device=cuda"}) {
    const auto out = test::make_temp_dir("cli_gpu");
    ProgramRun r = run_train(std::string("data.dataset=synthetic data.synthetic_size=64 data.image_size=8 "
                                         "model.in_channels=3 model.widths=[4] model.blocks=[1] output.dir=") +
                             out.string() + " " + setting);
    EXPECT_NE(r.exit_code, 0) << setting << "\n" << r.output;
    const std::string key = std::string(setting).substr(0, std::string(setting).find('='));
    EXPECT_NE(r.output.find(key), std::string::npos) << r.output;
    // Asked for the GPU, a build without the CUDA backend names that as the cause.
    if (!kernels::kCudaBuild && key == "train.device") {
      EXPECT_NE(r.output.find("this build has no CUDA backend"), std::string::npos) << r.output;
    }
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

// Every program follows one convention (apps/cli): --version prints the version, the git commit
// and the CUDA libraries (or "CPU only"); --help prints a usage line and the options on stdout;
// an unknown option is an error on stderr naming it, exit code 2.
TEST(Cli, EveryProgramHasTheSameVersionHelpAndErrors) {
  const auto dir = test::make_temp_dir("cli_conv");
  auto run = [&](const std::string& program, const std::string& args, const char* stream) {
    const std::string out = (dir / "stdout.txt").string(), err = (dir / "stderr.txt").string();
    const int status = std::system(((test::binary_dir() / "apps" / program).string() + " " + args + " > " + out +
                                    " 2> " + err).c_str());
    std::ifstream in(std::string(stream) == "stdout" ? out : err);
    std::stringstream ss;
    ss << in.rdbuf();
    return ProgramRun{WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str()};
  };
  std::string first_version;
  for (const std::string program : {"cudagrad-train", "cudagrad-bench", "cudagrad-bench-cpu", "cudagrad-launch"}) {
    ProgramRun r = run(program, "--version", "stdout");
    EXPECT_EQ(r.exit_code, 0) << program << r.output;
    EXPECT_EQ(r.output.rfind("cudagrad ", 0), 0u) << program << ": " << r.output;
    EXPECT_NE(r.output.find(" ("), std::string::npos) << r.output;  // the commit, or "unknown"
#ifdef CUDAGRAD_WITH_CUDA
    for (const char* lib : {"CUDA ", "cuDNN ", "NCCL "}) EXPECT_NE(r.output.find(lib), std::string::npos) << r.output;
#else
    EXPECT_NE(r.output.find("CPU only"), std::string::npos) << r.output;
#endif
    if (first_version.empty()) first_version = r.output;
    EXPECT_EQ(r.output, first_version) << "every program reports the same build";
    r = run(program, "--help", "stdout");
    EXPECT_EQ(r.exit_code, 0) << program << r.output;
    EXPECT_NE(r.output.find("Usage: " + program), std::string::npos) << r.output;
    for (const char* option : {"--help", "--version"}) EXPECT_NE(r.output.find(option), std::string::npos) << r.output;
    r = run(program, "--no-such-option", "stderr");
    EXPECT_EQ(r.exit_code, 2) << program << r.output;
    EXPECT_NE(r.output.find(program + ": error:"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("--no-such-option"), std::string::npos) << r.output;
    r = run(program, "--no-such-option", "stdout");
    EXPECT_EQ(r.output, "") << program << ": errors go to stderr";
  }
  // train and bench list the config keys in their help.
  for (const std::string program : {"cudagrad-train", "cudagrad-bench"}) {
    const ProgramRun r = run(program, "--help", "stdout");
    for (const char* key : {"optim.lr", "sched.warmup_steps", "output.dir"})
      EXPECT_NE(r.output.find(key), std::string::npos) << program << " --help lacks " << key;
  }
  ProgramRun r = run("cudagrad-train", "--config", "stderr");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--config"), std::string::npos) << r.output;
  r = run("cudagrad-bench", "--steps 0", "stderr");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--steps"), std::string::npos) << r.output;
}

// The command: switching the schedule on the command line is not refused because the file
// sets the other schedule's key; it warns once, naming the key. Missing data then stops the run
// (exit 1), which shows the config was accepted without training anything.
TEST(TrainCli, SwitchingAVariantWarnsOnceAboutKeysItDoesNotUse) {
  const auto out = test::make_temp_dir("cli_variant");
  ProgramRun r = run_train("--config " + config("fashion_mnist_cpu.yaml") +
                           " sched.name=constant optim.name=adamw data.path=/nonexistent/fmnist output.dir=" + out.string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("/nonexistent/fmnist"), std::string::npos) << r.output;
  EXPECT_EQ(count_of(r.output, "'sched.warmup_steps'"), 1) << r.output;  // one warning
  EXPECT_EQ(count_of(r.output, "has no effect"), 2) << r.output;       // warmup_steps, nesterov
  EXPECT_NE(r.output.find("'optim.nesterov'"), std::string::npos) << r.output;
  // Bad values stay errors, whatever the variant.
  r = run_train("--config " + config("fashion_mnist_cpu.yaml") + " sched.name=constant sched.warmup_steps=abc");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("sched.warmup_steps"), std::string::npos) << r.output;
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
  EXPECT_NE(r.output.find("eval after epoch 2: test loss"), std::string::npos) << r.output;

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

// train.max_steps ending an epoch part-way: the evaluation says where it happened.
TEST(TrainCli, AnEvaluationPartWayThroughAnEpochSaysSo) {
  const auto out = test::make_temp_dir("cli_part_way");
  const ProgramRun r = run_train(tiny_run(out) + " data.batch_size=16");  // 4 steps an epoch, 1 run
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("eval at step 1 (epoch 1 stopped part-way): test loss"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("eval after epoch"), std::string::npos) << r.output;
}

TEST(BenchCli, MeasuresTheTrainingStepAndPrintsJsonLast) {
  const auto dir = test::make_temp_dir("bench_out");
  const std::string cmd = (test::binary_dir() / "apps" / "cudagrad-bench").string() +
                          " --warmup 1 --steps 3 data.batch_size=4 data.image_size=8 model.widths=[4,8] "
                          "model.blocks=[1,1] train.device=cpu data.path=/nonexistent/images > " +
                          (dir / "log.txt").string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream in(dir / "log.txt");
  std::string line, last, all;
  while (std::getline(in, line)) {
    all += line + "\n";
    if (!line.empty()) last = line;
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << last;
  // It runs on random batches: a data.path it does not read is named, not silently ignored.
  EXPECT_NE(all.find("data.path (/nonexistent/images) is not read"), std::string::npos) << all;
  const auto j = nlohmann::json::parse(last);
  EXPECT_EQ(j["bench"], "cudagrad");
  EXPECT_GT(j["images_per_s"].get<double>(), 0.0);
  for (const char* k : {"step_ms_median", "forward_ms", "backward_ms", "comm_exposed_ms", "optimizer_ms", "peak_mem_bytes"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_GT(j["peak_mem_bytes"].get<double>(), 0.0);
}

// Issue 24: --cuda-graph once set train.cuda_graph after the config was validated, so a setting a
// captured step cannot hold ran anyway (zero_sharding: capture ended on an unjoined stream;
// grad_accum_steps=2: gradients silently scaled down). The flag now goes through the config's
// rules: exit 2 naming both keys, on this GPU-less machine too, so before any device is needed
// (train.device is auto, which the rules leave to the device check that comes later).
TEST(BenchCli, CudaGraphFlagIsRefusedWithSettingsACapturedStepCannotHold) {
  const std::string tiny = " --cuda-graph --warmup 5 --steps 1 data.batch_size=4 data.image_size=8 "
                           "model.widths=[4,8] model.blocks=[1,1] ";
  for (const std::string setting : {"train.grad_accum_steps=2", "optim.zero_sharding=true"}) {
    const ProgramRun r = run_bench(tiny + setting);
    EXPECT_EQ(r.exit_code, 2) << setting << "\n" << r.output;
    EXPECT_NE(r.output.find("train.cuda_graph"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(setting.substr(0, setting.find('='))), std::string::npos) << r.output;
  }
  // The flag wins over a train.cuda_graph=false given before it, and the rules still apply.
  const ProgramRun r = run_bench(tiny + "train.cuda_graph=false train.grad_accum_steps=2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("train.grad_accum_steps"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace cg
