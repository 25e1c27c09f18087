// The training config: the shipped configs load, defaults are the documented ones, the resolved
// YAML round-trips, and cross-key rules fail naming the key.
#include <gtest/gtest.h>

#include <fstream>

#include "apps/common/train_config.h"
#include "support/paths.h"
#include "util/check.h"

namespace cg::apps {
namespace {

std::string config(const std::string& name) { return (test::source_dir() / "configs" / name).string(); }

std::string error_of(const std::vector<std::string>& overrides) {
  try {
    load_train_config("", overrides);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(TrainConfig, ShippedConfigsLoad) {
  TrainConfig cpu = load_train_config(config("fashion_mnist_cpu.yaml"), {});
  EXPECT_EQ(cpu.model.widths, (std::vector<int64_t>{16, 32, 64}));
  EXPECT_EQ(cpu.model.in_channels, 1);
  EXPECT_EQ(cpu.train.epochs, 3);
  EXPECT_EQ(cpu.train.device, DeviceName::cpu);
  TrainConfig gpu = load_train_config(config("fashion_mnist.yaml"), {});
  EXPECT_EQ(gpu.model.widths, (std::vector<int64_t>{64, 128, 256}));
  EXPECT_TRUE(gpu.amp.enabled);
  EXPECT_EQ(gpu.amp.dtype, AmpDtype::fp16);
}

TEST(TrainConfig, DefaultsFollowTheSeedArticle) {
  TrainConfig c = load_train_config("", {});
  EXPECT_EQ(c.model.num_classes, 10);
  EXPECT_EQ(c.model.in_channels, 3);
  EXPECT_EQ(c.data.batch_size, 64);
  EXPECT_EQ(c.data.num_workers, 4);
  EXPECT_EQ(c.train.epochs, 10);
  EXPECT_DOUBLE_EQ(c.optim.lr, 0.01);
  EXPECT_DOUBLE_EQ(c.optim.momentum, 0.9);
  EXPECT_DOUBLE_EQ(c.optim.weight_decay, 1e-4);
  EXPECT_EQ(c.train.grad_accum_steps, 1);
  EXPECT_EQ(c.checkpoint.save_every, 1);
  EXPECT_EQ(c.train.log_interval, 10);
  EXPECT_EQ(c.train.seed, 42);
  EXPECT_FALSE(c.profile.enabled);
}

TEST(TrainConfig, OverridesAndYamlRoundTrip) {
  TrainConfig c = load_train_config(config("fashion_mnist_cpu.yaml"),
                                    {"model.widths=[8,16,32]", "optim.name=adamw", "optim.nesterov=false",
                                     "sched.name=constant", "sched.warmup_steps=0", "output.dir=/tmp/x y"});
  EXPECT_EQ(c.model.widths, (std::vector<int64_t>{8, 16, 32}));
  EXPECT_EQ(c.optim.name, OptimizerName::adamw);
  EXPECT_EQ(c.output.dir, "/tmp/x y");
  const std::string yaml = to_yaml(c);
  const auto path = test::make_temp_dir("tc") / "resolved.yaml";
  std::ofstream(path) << yaml;
  EXPECT_EQ(to_yaml(load_train_config(path.string(), {})), yaml);
}

TEST(TrainConfig, ErrorsNameTheKey) {
  std::string e = error_of({"optim.lrr=0.1"});
  EXPECT_NE(e.find("optim.lrr"), std::string::npos) << e;
  EXPECT_NE(e.find("optim.lr'"), std::string::npos) << e;  // did you mean
  EXPECT_NE(error_of({"data.batch_size=abc"}).find("data.batch_size"), std::string::npos);
  EXPECT_NE(error_of({"data.batch_size=0"}).find("out of range"), std::string::npos);
  EXPECT_NE(error_of({"model.widths=[16,32]"}).find("model.blocks"), std::string::npos);
  EXPECT_NE(error_of({"sched.warmup_steps=5"}).find("warmup_cosine"), std::string::npos);
  EXPECT_NE(error_of({"amp.dtype=fp8"}).find("fp16"), std::string::npos);
  EXPECT_NE(error_of({"data.dataset=imagenet"}).find("fashion_mnist"), std::string::npos);
}

TEST(TrainConfig, HelpListsEveryKey) {
  const std::string h = train_config_help();
  for (const char* k : {"model.widths", "model.blocks", "model.in_channels", "model.num_classes", "model.init_from",
                        "data.dataset", "data.path", "data.image_size", "data.batch_size", "data.num_workers",
                        "data.shuffle", "data.augment", "optim.name", "optim.lr", "optim.momentum", "optim.nesterov",
                        "optim.weight_decay", "sched.name", "sched.warmup_steps", "train.epochs", "train.max_steps",
                        "train.grad_accum_steps", "train.seed", "train.log_interval", "train.device", "amp.enabled",
                        "amp.dtype", "checkpoint.dir", "checkpoint.save_every", "checkpoint.resume_from",
                        "dist.backend", "dist.bucket_cap_mb", "output.dir", "profile.enabled"})
    EXPECT_NE(h.find(k), std::string::npos) << k;
}

}  // namespace
}  // namespace cg::apps
