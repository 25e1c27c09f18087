// train.cuda_graph on a GPU (train/step_graph.h, run by train/step.h): from the same seed and
// batches, steps replayed from a CUDA graph give bit for bit the losses, weights and BatchNorm statistics of the
// eager steps, with a learning rate that changes every step (fp32 SGD with momentum; fp16 with
// loss scaling and AdamW). Bit-identical is expected because the native convolution and batch
// norm kernels are deterministic (kernels.conv/batch_norm=native; cuDNN's timed algorithm choice
// could differ between two runs); with cuDNN's (the trainer's default) the replays stay close to
// eager. A replay with lr 0 leaves the weights as they were; what is
// allocated outside the capture never comes from its pool; neither the capture nor steady replays
// reach cudaMalloc.
// cudagrad-train with train.cuda_graph=auto (the default) captures its step and logs the same
// losses as with false, resumes from its checkpoint, and captures the modeled communication
// backend with fp16. Skips without a GPU.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "graphed_vs_eager.h"
#include "dist/gradient_comm.h"
#include "train/parts.h"
#include "engine/autograd/grad_mode.h"
#include "engine/device_allocator.h"
#include "engine/random.h"
#include "kernels/cuda/device_info.h"
#include "support/gpu_ops.h"
#include "support/checkpoint_files.h"
#include "support/metrics_file.h"
#include "support/need_gpu.h"
#include "support/paths.h"
#include "util/check.h"

namespace cg::train {
namespace {

using test::expect_same_losses;

// A small MiniResNet with its optimizer and step: the training parts of `extra` over the base
// settings (its compute stream made current), eager unless `extra` says train.cuda_graph=true.
// The base settings come first, so that `extra` (applied after them) may override any.
struct Trainee {
  explicit Trainee(const std::vector<std::string>& extra) : c(config(extra)), dist(c.dist.timeout_s), parts(c, dist) {}
  static TrainConfig config(const std::vector<std::string>& extra) {
    std::vector<std::string> overrides = {"train.device=cuda",  "model.widths=[8,16]",      "model.blocks=[1,1]",
                                          "model.in_channels=3", "kernels.conv=native",       "kernels.batch_norm=native",
                                          "optim.weight_decay=0.0005", "train.cuda_graph=false"};
    overrides.insert(overrides.end(), extra.begin(), extra.end());
    return load_train_config("", overrides);
  }
  TrainStep& step() { return parts.step(); }
  const StepGraph& graph() {  // with train.cuda_graph=true
    const StepGraph* graph = parts.step().graph();
    CG_CHECK(graph != nullptr, "train.cuda_graph=true left the step without its graph");
    return *graph;
  }
  // One optimizer step on `batch`.
  StepOutputs run(const data::DeviceBatch& batch, double lr) { return step().run_micro_step(batch, {.lr = lr}); }

  TrainConfig c;
  DistContext dist;
  TrainingParts parts;
};

const std::string kGraphed = "train.cuda_graph=true";

std::vector<data::DeviceBatch> batches(Device device, int count) { return test::step_batches(device, count, 3); }

double lr_at(int s) { return 0.05 / (1.0 + 0.3 * s); }  // a new value every step

struct Trajectory {
  std::vector<float> losses;
  std::vector<std::vector<unsigned char>> state;  // every state-dict tensor's bytes at the end
};

std::vector<std::vector<unsigned char>> state_bytes(const nn::Module& model) {
  std::vector<std::vector<unsigned char>> out;
  for (const auto& [name, t] : model.state_dict()) {
    const Tensor h = t.to(Device::cpu());
    const auto* p = static_cast<const unsigned char*>(h.raw_data());
    out.emplace_back(p, p + h.nbytes());
  }
  return out;
}

// The same steps through the one step object, with train.cuda_graph as `graphed` says.
Trajectory train(std::vector<std::string> extra, bool graphed, int steps) {
  if (graphed) extra.push_back(kGraphed);
  Trainee t(extra);
  EXPECT_EQ(t.step().graph() != nullptr, graphed);
  const std::vector<data::DeviceBatch> data = batches(t.parts.device(), 4);
  Trajectory out;
  for (int s = 0; s < steps; ++s) {
    const StepOutputs step = t.run(data[size_t(s) % data.size()], lr_at(s));
    out.losses.push_back(float(step.loss.item()));
  }
  if (graphed && t.step().graph()) {
    EXPECT_EQ(t.graph().replays(), steps - StepGraph::kEagerSteps);
  }
  EXPECT_EQ(t.parts.optimizer().steps_taken(), steps);
  out.state = state_bytes(t.parts.model());
  return out;
}

void expect_graph_matches_eager(const std::vector<std::string>& extra) {
  const int steps = 9;  // 3 eager, the capture, 5 more replays
  const Trajectory eager = train(extra, false, steps), graphed = train(extra, true, steps);
  expect_same_losses(eager.losses, graphed.losses);
  ASSERT_EQ(eager.state.size(), graphed.state.size());
  for (size_t i = 0; i < eager.state.size(); ++i) EXPECT_EQ(eager.state[i], graphed.state[i]) << "state tensor " << i;
}

TEST(StepGraph, Fp32SgdMatchesEagerBitForBit) {
  NEED_GPU();
  expect_graph_matches_eager({"optim.name=sgd", "optim.momentum=0.9"});
}

TEST(StepGraph, Fp16AdamWMatchesEagerBitForBit) {
  NEED_GPU();
  expect_graph_matches_eager({"optim.name=adamw", "amp.enabled=true", "amp.dtype=fp16"});
}

// The trainer's default convolution is cuDNN's. Its algorithm search (cudnnFind*, which
// synchronizes and allocates, both illegal in a capture) runs in the eager steps, so the capture
// only records the chosen kernels. The graphed and eager runs may pick different algorithms (a
// timed search), so their losses agree within a tolerance rather than bit for bit.
TEST(StepGraph, CudnnConvolutionsCaptureAndReplayCloseToEager) {
  NEED_GPU();
  NEED_CUDA_LIBRARY("cuDNN");
  const std::vector<std::string> extra = {"kernels.conv=cudnn", "kernels.batch_norm=cudnn", "optim.name=sgd",
                                          "optim.momentum=0.9"};
  const int steps = 9;
  const Trajectory eager = train(extra, false, steps), graphed = train(extra, true, steps);
  ASSERT_EQ(eager.losses.size(), graphed.losses.size());
  for (size_t s = 0; s < eager.losses.size(); ++s)
    EXPECT_NEAR(eager.losses[s], graphed.losses[s], 1e-3 * std::max(1.0f, std::abs(eager.losses[s]))) << "step " << s;
}

std::vector<std::vector<unsigned char>> parameter_bytes(const nn::Module& model) {
  std::vector<std::vector<unsigned char>> out;
  for (const auto& [name, t] : model.named_parameters()) {
    const Tensor h = t.to(Device::cpu());
    const auto* p = static_cast<const unsigned char*>(h.raw_data());
    out.emplace_back(p, p + h.nbytes());
  }
  return out;
}

TEST(StepGraph, ReplaysReadTheLearningRateOfTheirStep) {
  NEED_GPU();
  Trainee t({"optim.name=sgd", "optim.momentum=0.9", kGraphed});
  const std::vector<data::DeviceBatch> data = batches(t.parts.device(), 2);
  for (int s = 0; s <= StepGraph::kEagerSteps; ++s) t.run(data[size_t(s) % 2], 0.05);
  ASSERT_TRUE(t.graph().captured());
  const auto before = parameter_bytes(t.parts.model());
  t.run(data[0], 0.0);
  EXPECT_EQ(parameter_bytes(t.parts.model()), before) << "lr 0 must leave every weight as it was";
  t.run(data[1], 0.05);
  EXPECT_NE(parameter_bytes(t.parts.model()), before) << "the replay kept the captured learning rate";
}

TEST(StepGraph, ItsPoolIsNotUsedOutsideTheCaptureAndReplaysDoNotAllocate) {
  NEED_GPU();
  Trainee t({"optim.name=sgd", kGraphed});
  const std::vector<data::DeviceBatch> data = batches(t.parts.device(), 2);
  for (int s = 0; s <= StepGraph::kEagerSteps + 1; ++s) t.run(data[size_t(s) % 2], 0.05);
  const StepGraph& graph = t.graph();
  EXPECT_EQ(graph.backend_allocations_in_capture(), 0u) << "the last eager step left its blocks in the pool";
  CachingAllocator& allocator = allocator_for(t.parts.device());
  const PoolStats pool = graph.pool_stats();
  EXPECT_GT(pool.reserved_bytes, 0u);
  const size_t backend_calls = allocator.stats().backend_allocations;
  for (int s = 0; s < 5; ++s) {
    const StepOutputs out = t.run(data[size_t(s) % 2], 0.05);
    EXPECT_EQ(allocator.pool_of(out.loss.raw_data()), 0u);
  }
  EXPECT_EQ(allocator.stats().backend_allocations, backend_calls) << "steady replays reached cudaMalloc";
  EXPECT_EQ(graph.pool_stats().reserved_bytes, pool.reserved_bytes);
  {  // an evaluation between replays: every tensor it makes comes from the shared cache
    autograd::NoGradGuard no_grad;
    nn::MiniResNet& model = t.parts.model();
    model.eval();
    const Tensor logits = model(data[0].images);
    EXPECT_EQ(allocator.pool_of(logits.raw_data()), 0u);
    model.train();
  }
  EXPECT_EQ(graph.pool_stats().in_use_bytes, pool.in_use_bytes);
  t.run(data[0], 0.05);
  t.parts.compute().synchronize();
}

// A transport whose communication has failed once `failed` is set, as after the watchdog aborted
// a timed-out replay. It is only asked about its health and to watch replays: the graph is given
// an eager step without DDP.
class FailingComm : public dist::GradientComm {
 public:
  bool failed = false;
  mutable int watched = 0;
  std::shared_ptr<dist::Work> all_reduce_average(Tensor&, const Stream&, const std::string&) override {
    return nullptr;
  }
  void wait(dist::Work&, const Stream&) override {}
  void broadcast(Tensor&, const Stream&) override {}
  void all_reduce_sum(double*, int64_t, const Stream&, const std::string&) override {}
  std::string name() const override { return "failing"; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void watch_replay(const Stream&, const std::string&) const override { ++watched; }
  void check_health() const override {
    if (failed) throw Error("graph_replay (training step, replay 1) timed out; communicator aborted");
  }
};

TEST(StepGraph, NoReplayAfterCommunicationFailed) {
  NEED_GPU();
  Trainee t({"optim.name=sgd"});
  const std::vector<data::DeviceBatch> data = batches(t.parts.device(), 2);
  FailingComm comm;
  StepGraph graph([&](const data::DeviceBatch& b, double lr) { return t.run(b, lr); }, t.parts.optimizer(), &comm,
                  t.parts.compute());
  for (int s = 0; s <= StepGraph::kEagerSteps; ++s) graph.run(data[size_t(s) % 2], 0.05);
  ASSERT_EQ(graph.replays(), 1);
  EXPECT_EQ(comm.watched, 1);
  comm.failed = true;
  try {
    graph.run(data[0], 0.05);
    FAIL() << "a replay ran after communication had failed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
  }
  EXPECT_EQ(graph.replays(), 1) << "the captured collectives were launched on an aborted communicator";
  t.parts.compute().synchronize();
}

// ---- cudagrad-train as a program

struct ProgramRun {
  int exit_code;
  std::string output;
};

ProgramRun run_train(const std::string& args) {
  const auto log = test::make_temp_dir("graphed_train_log") / "log.txt";
  const std::string cmd = (test::binary_dir() / "apps" / "cudagrad-train").string() + args + " > " + log.string() +
                          " 2>&1";
  const int status = std::system(cmd.c_str());
  std::stringstream ss;
  ss << std::ifstream(log).rdbuf();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ss.str()};
}

using test::metrics_records;

// On the emulated GPU, where a step of the GPU's size takes about a second, an eighth of it (as
// tests/apps/cuda/train_gpu_test.cpp's kSmall): the same 32 steps an epoch, at half the side in
// batches of 32. What is compared (eager against graphed, loss by loss; a resume) holds at any size.
const std::string kProgram =
    std::string(test::kEmulatedGpu ? " data.synthetic_size=1024 data.image_size=8 data.batch_size=32"
                                   : " data.synthetic_size=2048 data.image_size=16 data.batch_size=64") +
    " data.dataset=synthetic model.in_channels=3"
    " model.widths=[16,32] model.blocks=[1,1] optim.lr=0.05 train.device=cuda train.log_interval=4 train.epochs=2"
    " kernels.conv=native kernels.batch_norm=native";

TEST(GraphedTraining, SameLossesAsEagerAndItsCheckpointResumes) {
  NEED_GPU();
  const auto eager = test::make_temp_dir("graphed_train_eager"), graphed = test::make_temp_dir("graphed_train_on");
  ProgramRun r = run_train(kProgram + " train.cuda_graph=false output.dir=" + eager.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("captured as a CUDA graph"), std::string::npos) << r.output;
  // train.cuda_graph=auto, the default, captures this run's step.
  r = run_train(kProgram + " output.dir=" + graphed.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("captured as a CUDA graph"), std::string::npos) << r.output;
  const auto a = metrics_records(eager, "train"), b = metrics_records(graphed, "train");
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["loss"].get<double>(), b[i]["loss"].get<double>()) << "step " << a[i]["step"];
    EXPECT_EQ(a[i]["lr"].get<double>(), b[i]["lr"].get<double>());
  }
  const auto eval_a = metrics_records(eager, "eval"), eval_b = metrics_records(graphed, "eval");
  ASSERT_EQ(eval_b.size(), 2u) << r.output;
  EXPECT_EQ(eval_a.back()["accuracy"].get<double>(), eval_b.back()["accuracy"].get<double>());
  // A new process resumes from the graphed run's epoch-1 checkpoint and captures anew.
  const auto resumed = test::make_temp_dir("graphed_train_resumed");
  const std::string epoch_1 = (graphed / "checkpoints" / "epoch_1.safetensors").string();
  r = run_train(kProgram + " train.cuda_graph=true output.dir=" + resumed.string() + " checkpoint.resume_from=" + epoch_1);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(test::resumed_once_from(resumed, epoch_1, test::step_of(epoch_1))) << r.output;
  const auto eval_c = metrics_records(resumed, "eval");
  ASSERT_EQ(eval_c.size(), 1u) << "only epoch 2 is left after the end of epoch 1\n" << r.output;
  EXPECT_NEAR(eval_c.back()["accuracy"].get<double>(), eval_b.back()["accuracy"].get<double>(), 0.02) << r.output;
}

TEST(GraphedTraining, CapturesTheModeledBackendWithFp16) {
  NEED_GPU();
  const auto out = test::make_temp_dir("graphed_train_modeled");
  ProgramRun r = run_train(kProgram + " train.cuda_graph=true amp.enabled=true amp.dtype=fp16 dist.backend=modeled"
                                      " dist.modeled_world_size=8 train.epochs=1 output.dir=" + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("modeled ring of 8"), std::string::npos) << r.output;
  const auto train = metrics_records(out, "train");
  ASSERT_FALSE(train.empty());
  EXPECT_LT(train.back()["loss"].get<double>(), train.front()["loss"].get<double>()) << r.output;
}

}  // namespace
}  // namespace cg::train
