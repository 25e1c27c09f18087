// One training step against PyTorch: tests/golden/make_step_golden.py builds a small MiniResNet in
// PyTorch, runs forward, backward and an optimizer step, and saves weights, batch, logits, loss,
// gradients and the updated state dict. We load the same weights, run the same step in float32
// and compare everything. Needs /usr/bin/python3 with torch; skips saying so otherwise.
#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/ops.h"
#include "nn/checkpoint.h"
#include "nn/miniresnet.h"
#include "nn/optimizer.h"
#include "support/golden_file.h"
#include "support/paths.h"
#include "support/need_tool.h"
#include "util/safetensors.h"

namespace cg::nn {
namespace {

using test::golden_meta;
using test::golden_meta_flag;
using test::golden_meta_list;
using test::golden_tensor;

// Worst |a-b| - (atol + rtol*|b|) over all elements; <= 0 means within tolerance.
double excess(const Tensor& a, const Tensor& ref, double atol, double rtol) {
  std::vector<double> x = a.to(DType::f64).to_vector<double>();
  std::vector<double> y = ref.to(DType::f64).to_vector<double>();
  double worst = -1;
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::abs(x[i] - y[i]) - (atol + rtol * std::abs(y[i])));
  return worst;
}

void check_step(const std::string& optimizer) {
  NEED_TOOL(test::missing_python_module("torch", "Debian's python3-torch"));
  auto dir = test::make_temp_dir("golden");
  const std::string path = (dir / "golden.safetensors").string();
  const std::string cmd = "/usr/bin/python3 " +
                          (test::source_dir() / "tests/golden/make_step_golden.py").string() +
                          " --optimizer " + optimizer + " " + path;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const safetensors::File f = safetensors::load(path);

  // The model and optimizer settings come from the file's metadata, as the script promises.
  MiniResNetOptions o;
  o.in_channels = int(golden_meta(f, "in_channels"));
  o.num_classes = int(golden_meta(f, "num_classes"));
  o.widths = golden_meta_list(f, "widths");
  o.blocks = golden_meta_list(f, "blocks");
  Generator gen(0);
  MiniResNet model(o, gen);
  std::map<std::string, Tensor> init;
  for (auto& [name, t] : model.state_dict()) init[name] = golden_tensor(f, "init." + name);
  model.load_state_dict(init);

  std::unique_ptr<Optimizer> opt;
  const double lr = golden_meta(f, "lr");
  ASSERT_EQ(f.metadata.at("optimizer"), optimizer);
  if (optimizer == "sgd") {
    SgdOptions h{float(lr), float(golden_meta(f, "momentum")), float(golden_meta(f, "weight_decay")),
                     float(golden_meta(f, "dampening")), golden_meta_flag(f, "nesterov")};
    opt = std::make_unique<SGD>(model.named_parameters(), h);
  } else {
    ASSERT_FALSE(golden_meta_flag(f, "amsgrad")) << "amsgrad is not implemented";
    AdamWOptions h{float(lr), float(golden_meta(f, "beta1")), float(golden_meta(f, "beta2")), float(golden_meta(f, "eps")),
                       float(golden_meta(f, "weight_decay"))};
    opt = std::make_unique<AdamW>(model.named_parameters(), h);
  }

  Tensor logits = model(golden_tensor(f, "input").to(DType::f32));
  Tensor loss = ops::cross_entropy(logits, golden_tensor(f, "labels"));
  EXPECT_LE(excess(logits, golden_tensor(f, "logits"), 1e-4, 1e-3), 0) << "logits";
  EXPECT_LE(excess(loss, golden_tensor(f, "loss"), 1e-5, 1e-4), 0) << "loss " << loss.item();
  loss.backward();
  for (auto& [name, p] : model.named_parameters())
    EXPECT_LE(excess(p.grad(), golden_tensor(f, "grad." + name), 1e-4, 2e-3), 0) << "grad." << name;
  opt->step(lr);
  for (auto& [name, t] : model.state_dict())
    EXPECT_LE(excess(t, golden_tensor(f, "after." + name), 1e-4, 1e-3), 0) << "after." << name;
}

TEST(PyTorchGolden, OneSgdStepMatches) { check_step("sgd"); }
TEST(PyTorchGolden, OneAdamWStepMatches) { check_step("adamw"); }

}  // namespace
}  // namespace cg::nn

namespace cg::nn {
namespace {

// A checkpoint written by cudagrad loads into the PyTorch model with strict=True.
TEST(PyTorchGolden, CheckpointLoadsIntoPyTorch) {
  NEED_TOOL(test::missing_python_module("torch", "Debian's python3-torch"));
  auto dir = test::make_temp_dir("golden_ckpt");
  const std::string path = (dir / "ckpt.safetensors").string();
  MiniResNetOptions o;
  o.in_channels = 1;
  o.widths = {4, 8, 16};
  Generator gen(0);
  MiniResNet model(o, gen);
  SGD opt(model.named_parameters(), {0.1f, 0.9f, 0.f, 0.f, false});
  Tensor x = Tensor::empty({2, 1, 8, 8});
  normal_(x, gen, 0, 1);
  ops::cross_entropy(model(x), Tensor::from_vector<int64_t>({1, 2}, {2})).backward();
  opt.step(0.1);
  save_checkpoint(path, model, opt, {1, 0, 1, "sgd", "", ""});
  const std::string cmd = "/usr/bin/python3 " + (test::source_dir() / "tests/golden/check_state_dict_loads.py").string() +
                          " " + path + " --in-channels 1 --widths 4,8,16";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace
}  // namespace cg::nn
