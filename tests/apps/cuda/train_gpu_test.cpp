// cudagrad-train end to end on the GPU, as real processes: fp16 mixed precision with the training
// set resident on the GPU learns and writes a checkpoint that resumes; bf16 and the native kernels
// train too; a channels-last model learns and its checkpoint resumes in NCHW; two ranks sharing
// one GPU (Gloo staged through pinned memory) end with identical replicas; the modeled
// communication backend runs and logs the ring model's time per step; cudagrad-bench's peak memory
// of a graphed step counts the graph's pool. Skips without a GPU.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "dist/gradient_comm.h"
#include "kernels/cuda/device_info.h"
#include "support/checkpoint_files.h"
#include "support/free_port.h"
#include "support/metrics_file.h"
#include "support/need_gpu.h"
#include "support/paths.h"

namespace cg {
namespace {
namespace fs = std::filesystem;

struct ProgramRun {
  int exit_code;
  std::string output;
};

ProgramRun run(const std::string& cmd) {
  const auto dir = test::make_temp_dir("gpu_train_log");
  const auto log = dir / "log.txt";
  const int status = std::system((cmd + " > " + log.string() + " 2>&1").c_str());
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str()};
}

std::string train() { return (test::binary_dir() / "apps" / "cudagrad-train").string(); }

// A small synthetic problem a few hundred steps can learn. On the emulated GPU, where each of its
// steps takes seconds, an eighth of it: half the images at half the side, in batches of 32.
const std::string kSmall =
    std::string(test::kEmulatedGpu ? " data.synthetic_size=1024 data.image_size=8 data.batch_size=32"
                                   : " data.synthetic_size=2048 data.image_size=16 data.batch_size=64") +
    " data.dataset=synthetic model.in_channels=3 model.widths=[16,32] model.blocks=[1,1] optim.lr=0.05"
    " train.device=cuda train.log_interval=8";

std::vector<nlohmann::json> evals(const fs::path& out) { return test::metrics_records(out, "eval"); }

// Test accuracy that shows learning on kSmall after 3 epochs: twice chance. Measured: the GPU's
// kSmall on the CPU 31% (19% after 2 epochs); the emulated GPU's smaller one 42% in fp16 with
// resident data, 40% in bf16 with the native kernels, 6% with optim.lr=0 (nothing learned).
constexpr double kLearned = 0.2;

TEST(GpuTrain, Fp16ResidentDataLearnsAndResumes) {
  NEED_GPU();
  const auto out = test::make_temp_dir("gpu_train_fp16");
  ProgramRun r = run(train() + kSmall + " amp.enabled=true amp.dtype=fp16 data.gpu_resident=true train.epochs=3 output.dir=" +
              out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto e = evals(out);
  ASSERT_EQ(e.size(), 3u) << r.output;
  EXPECT_GT(e.back()["accuracy"].get<double>(), kLearned) << r.output;
  EXPECT_NE(r.output.find("cudaMalloc calls"), std::string::npos) << r.output;
  // Resume from the end of epoch 2 and finish: the same final test accuracy.
  const auto out2 = test::make_temp_dir("gpu_train_resume");
  const std::string epoch_2 = (out / "checkpoints" / "epoch_2.safetensors").string();
  r = run(train() + kSmall + " amp.enabled=true amp.dtype=fp16 data.gpu_resident=true train.epochs=3 output.dir=" +
          out2.string() + " checkpoint.resume_from=" + epoch_2);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(test::resumed_once_from(out2, epoch_2, test::step_of(epoch_2))) << r.output;
  const auto e2 = evals(out2);
  ASSERT_EQ(e2.size(), 1u) << "only epoch 3 is left after the end of epoch 2\n" << r.output;
  EXPECT_NEAR(e2.back()["accuracy"].get<double>(), e.back()["accuracy"].get<double>(), 0.02) << r.output;
}

TEST(GpuTrain, Bf16AndTheNativeKernelsTrain) {
  NEED_GPU();
  const auto out = test::make_temp_dir("gpu_train_bf16");
  ProgramRun r = run(train() + kSmall + " amp.enabled=true amp.dtype=bf16 kernels.conv=native kernels.batch_norm=native"
                                 " train.epochs=3 output.dir=" + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GT(evals(out).back()["accuracy"].get<double>(), kLearned) << r.output;
}

TEST(GpuTrain, ChannelsLastLearnsAndItsCheckpointResumesInNchw) {
  NEED_GPU();
  const auto out = test::make_temp_dir("gpu_train_nhwc");
  ProgramRun r = run(train() + kSmall + " model.channels_last=true amp.enabled=true amp.dtype=fp16 train.epochs=3"
                                        " output.dir=" + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto e = evals(out);
  ASSERT_EQ(e.size(), 3u) << r.output;
  EXPECT_GT(e.back()["accuracy"].get<double>(), kLearned) << r.output;
  // The weights do not depend on the layout: an NCHW run resumes from the NHWC checkpoint.
  const auto out2 = test::make_temp_dir("gpu_train_nhwc_resume");
  const std::string epoch_2 = (out / "checkpoints" / "epoch_2.safetensors").string();
  r = run(train() + kSmall + " model.channels_last=false amp.enabled=true amp.dtype=fp16 train.epochs=3 output.dir=" +
          out2.string() + " checkpoint.resume_from=" + epoch_2);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(test::resumed_once_from(out2, epoch_2, test::step_of(epoch_2))) << r.output;
  const auto e2 = evals(out2);
  ASSERT_EQ(e2.size(), 1u) << "only epoch 3 is left after the end of epoch 2\n" << r.output;
  EXPECT_NEAR(e2.back()["accuracy"].get<double>(), e.back()["accuracy"].get<double>(), 0.03) << r.output;
  // The hand-written convolution takes channels-last between layout changes, and learns too.
  const auto out3 = test::make_temp_dir("gpu_train_nhwc_native");
  r = run(train() + kSmall + " model.channels_last=true amp.enabled=true amp.dtype=fp16 kernels.conv=native "
                             "train.epochs=3 output.dir=" + out3.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto e3 = evals(out3);
  ASSERT_EQ(e3.size(), 3u) << r.output;
  EXPECT_GT(e3.back()["accuracy"].get<double>(), kLearned) << r.output;
}

TEST(GpuTrain, TwoRanksShareOneGpuThroughStagedGloo) {
  NEED_GPU();
  const auto out = test::make_temp_dir("gpu_train_ddp");
  const std::string launch = (test::binary_dir() / "apps" / "cudagrad-launch").string();
  ProgramRun r = run(launch + " --standalone --nproc-per-node 2 --master-port " + std::to_string(test::free_port()) + " " +
              train() + kSmall + " amp.enabled=true train.epochs=1 dist.backend=auto output.dir=" + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pinned"), std::string::npos) << "auto picks staged Gloo on one GPU\n" << r.output;
  EXPECT_EQ(evals(out).size(), 1u) << r.output;  // the end-of-run replica check passed (exit 0)
}

TEST(GpuTrain, ModeledBackendRunsOneProcessAsEightRanks) {
  NEED_GPU();
  const auto out = test::make_temp_dir("gpu_train_modeled");
  ProgramRun r = run(train() + kSmall + " train.epochs=1 train.max_steps=20 dist.backend=modeled dist.modeled_world_size=8"
                                 " output.dir=" + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("modeled ring of 8"), std::string::npos) << r.output;
  // The figure logged is the ring model over the buckets the log names: the model is affine in the
  // bytes, so N buckets of B bytes in all take ring(B) plus N - 1 times ring(0), the latency.
  std::smatch buckets, modeled;
  ASSERT_TRUE(std::regex_search(r.output, buckets, std::regex(R"(DDP \(dist.sharding=no_shard\) over .*: (\d+) gradient buckets, (\d+) bytes all-reduced)")))
      << r.output;
  ASSERT_TRUE(std::regex_search(r.output, modeled, std::regex(R"(one step's collectives: ([0-9.]+) ms)"))) << r.output;
  const int64_t n = std::stoll(buckets[1]);
  const size_t bytes = std::stoull(buckets[2]);
  const dist::Link link = dist::nvlink_link();
  const double want = dist::ring_all_reduce_ms(bytes, 8, link) + double(n - 1) * dist::ring_all_reduce_ms(0, 8, link);
  EXPECT_NEAR(std::stod(modeled[1]), want, 1e-3 * want + 1e-4) << r.output;
}

// The last line of cudagrad-bench's output, its JSON.
nlohmann::json bench_json(const ProgramRun& r) {
  const std::string text = r.output.substr(0, r.output.find_last_not_of('\n') + 1);
  return nlohmann::json::parse(text.substr(text.find_last_of('\n') + 1));
}

// A replayed step allocates nothing: its activations sit in the graph's private pool. The graphed
// row once counted only what was allocated during the replays, so on the H100 it said 54 MiB
// against the eager step's 628. Here the activations are most of the eager peak, so without the
// pool the graphed figure would be a small fraction of it.
TEST(GpuBench, GraphedStepPeakMemoryCountsTheGraphsPool) {
  NEED_GPU();
  const std::string bench = (test::binary_dir() / "apps" / "cudagrad-bench").string() +
                            " --warmup 5 --steps 2 data.batch_size=32 data.image_size=8 model.widths=[8,16]"
                            " model.blocks=[1,1] train.device=cuda";
  const ProgramRun eager = run(bench), graphed = run(bench + " --cuda-graph");
  ASSERT_EQ(eager.exit_code, 0) << eager.output;
  ASSERT_EQ(graphed.exit_code, 0) << graphed.output;
  const double eager_peak = bench_json(eager)["peak_mem_bytes"].get<double>();
  const double graphed_peak = bench_json(graphed)["peak_mem_bytes"].get<double>();
  EXPECT_TRUE(bench_json(graphed)["cuda_graph"].get<bool>());
  EXPECT_GT(graphed_peak, 0.8 * eager_peak) << "eager " << eager_peak << " bytes, graphed " << graphed_peak;
}

}  // namespace
}  // namespace cg
