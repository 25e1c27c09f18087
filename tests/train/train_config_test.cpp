// The training config: the shipped configs load with the settings they promise, defaults are the
// documented ones, overrides apply, the resolved YAML reloads to an equal config, and bad values
// and inconsistent keys fail naming the key.
#include <gtest/gtest.h>

#include "support/messages.h"

#include <algorithm>
#include <fstream>

#include "train/train_config.h"
#include "support/paths.h"
#include "util/check.h"

namespace cg::train {
namespace {

using List = std::vector<int64_t>;

std::string shipped(const std::string& name) { return (test::source_dir() / "configs" / name).string(); }

std::string write(const std::string& text) {
  const auto path = test::make_temp_dir("tc") / "config.yaml";
  std::ofstream(path) << text;
  return path.string();
}

TrainConfig reload(const TrainConfig& c) { return load_train_config(write(to_yaml(c)), {}); }

std::string error_of(const std::vector<std::string>& overrides, const std::string& path = "") {
  try {
    load_train_config(path, overrides);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

using test::expect_mentions;

TEST(TrainConfig, CpuConfigIsTheSmallFashionMnistRun) {
  const TrainConfig c = load_train_config(shipped("fashion_mnist_cpu.yaml"), {});
  EXPECT_EQ(c.model.widths, (List{16, 32, 64}));
  EXPECT_EQ(c.model.blocks, (List{2, 2, 2}));
  EXPECT_EQ(c.model.in_channels, 1);
  EXPECT_EQ(c.data.dataset, data::DatasetKind::fashion_mnist);
  EXPECT_TRUE(c.data.batch_size == 64 || c.data.batch_size == 128) << c.data.batch_size;
  EXPECT_EQ(c.data.num_workers, 0);  // loader threads would compete with the 2 compute threads
  EXPECT_EQ(c.train.epochs, 3);
  EXPECT_EQ(c.train.device, DeviceName::cpu);
  EXPECT_EQ(c.optim.name, OptimizerName::sgd);
  EXPECT_GE(c.optim.lr, 0.05);
  EXPECT_LE(c.optim.lr, 0.1);
  EXPECT_DOUBLE_EQ(c.optim.momentum, 0.9);
  EXPECT_TRUE(c.optim.nesterov);
  EXPECT_DOUBLE_EQ(c.optim.weight_decay, 5e-4);
  EXPECT_NE(c.sched.name, nn::ScheduleKind::constant);
  EXPECT_FALSE(c.amp.enabled);
  EXPECT_EQ(c.output.dir, "runs/fashion_mnist_cpu");
}

TEST(TrainConfig, GpuConfigIsTheFullMiniResNetWithAmp) {
  const TrainConfig c = load_train_config(shipped("fashion_mnist.yaml"), {});
  EXPECT_EQ(c.model.widths, (List{64, 128, 256}));
  EXPECT_EQ(c.model.in_channels, 1);
  EXPECT_EQ(c.data.batch_size, 256);
  EXPECT_EQ(c.train.epochs, 15);
  EXPECT_EQ(c.train.device, DeviceName::cuda);
  EXPECT_TRUE(c.amp.enabled);
  EXPECT_EQ(c.amp.dtype, AmpDtype::fp16);
  EXPECT_EQ(c.output.dir, "runs/fashion_mnist");
}

TEST(TrainConfig, InChannelsFollowTheDataset) {
  EXPECT_EQ(load_train_config("", {}).model.in_channels, 1);
  EXPECT_EQ(load_train_config("", {"data.dataset=cifar10"}).model.in_channels, 3);
  EXPECT_EQ(load_train_config("", {"data.dataset=synthetic"}).model.in_channels, 3);
  EXPECT_EQ(load_train_config("", {"model.in_channels=0", "data.dataset=cifar10"}).model.in_channels, 3);
  // An explicit count is kept (the trainer then checks it against the images it reads).
  EXPECT_EQ(load_train_config("", {"data.dataset=synthetic", "model.in_channels=2"}).model.in_channels, 2);
  // The resolved count is what --print-config shows and config.yaml keeps.
  EXPECT_NE(to_yaml(load_train_config("", {})).find("in_channels: 1"), std::string::npos);
}

TEST(TrainConfig, DefaultsAreTheDocumentedOnes) {
  const TrainConfig c = load_train_config("", {});
  // The header's initializers are the defaults, once model.in_channels (0) is resolved to the
  // default dataset's (Fashion-MNIST: 1), so that the defaults alone train.
  TrainConfig expected;
  EXPECT_EQ(expected.model.in_channels, 0);
  expected.model.in_channels = 1;
  EXPECT_EQ(c, expected);
  // The seed article's TrainingConfig (its in_channels is 3, for CIFAR-10: see InChannelsFollowTheDataset).
  EXPECT_EQ(c.model.num_classes, 10);
  EXPECT_EQ(c.data.batch_size, 64);
  EXPECT_EQ(c.data.num_workers, 4);
  EXPECT_EQ(c.train.epochs, 10);
  EXPECT_DOUBLE_EQ(c.optim.lr, 0.01);
  EXPECT_DOUBLE_EQ(c.optim.momentum, 0.9);
  EXPECT_DOUBLE_EQ(c.optim.weight_decay, 1e-4);
  EXPECT_EQ(c.train.grad_accum_steps, 1);
  EXPECT_EQ(c.checkpoint.save_every, 1);
  EXPECT_EQ(c.checkpoint.resume_from, "");
  EXPECT_EQ(c.train.log_interval, 10);
  EXPECT_FALSE(c.profile.enabled);
  EXPECT_EQ(c.train.seed, 42);
  // The rest, as documented in the issue and train_config.h.
  EXPECT_EQ(c.model.widths, (List{64, 128, 256}));
  EXPECT_EQ(c.model.blocks, (List{2, 2, 2}));
  EXPECT_EQ(c.model.init_from, "");
  EXPECT_FALSE(c.model.channels_last);
  EXPECT_EQ(c.data.path, "");
  EXPECT_EQ(c.data.image_size, 0);
  EXPECT_EQ(c.data.synthetic_size, 50000);
  EXPECT_DOUBLE_EQ(c.optim.beta1, 0.9);
  EXPECT_DOUBLE_EQ(c.optim.beta2, 0.999);
  EXPECT_DOUBLE_EQ(c.optim.eps, 1e-8);
  EXPECT_FALSE(c.optim.zero_sharding);
  EXPECT_EQ(c.dist.sharding, dist::Sharding::no_shard);
  EXPECT_DOUBLE_EQ(c.sched.min_lr, 0.0);
  EXPECT_EQ(c.train.max_steps, 0);
  EXPECT_EQ(c.train.threads, 0);
  EXPECT_EQ(c.train.eval_batch_size, 256);
  EXPECT_FALSE(c.amp.enabled);
  EXPECT_EQ(c.checkpoint.dir, "");
  EXPECT_EQ(c.output.dir, "runs/latest");
}

TEST(TrainConfig, OverridesApplyOnTopOfTheFile) {
  const TrainConfig c = load_train_config(
      shipped("fashion_mnist_cpu.yaml"),
      {"model.widths=[8,16,32]", "optim.name=adamw", "optim.nesterov=false", "sched.name=constant",
       "sched.warmup_steps=0", "output.dir=/tmp/x y", "data.augment=true", "dist.bucket_cap_mb=0.5"});
  EXPECT_EQ(c.model.widths, (List{8, 16, 32}));
  EXPECT_EQ(c.optim.name, OptimizerName::adamw);
  EXPECT_EQ(c.sched.name, nn::ScheduleKind::constant);
  EXPECT_EQ(c.output.dir, "/tmp/x y");
  EXPECT_TRUE(c.data.augment);
  EXPECT_DOUBLE_EQ(c.dist.bucket_cap_mb, 0.5);
  EXPECT_EQ(c.train.epochs, 3);  // untouched keys keep the file's value
}

TEST(TrainConfig, ResolvedYamlReloadsToAnEqualConfig) {
  for (const std::string& path : {std::string(), shipped("fashion_mnist_cpu.yaml"), shipped("fashion_mnist.yaml")}) {
    const TrainConfig c = load_train_config(path, {});
    EXPECT_EQ(reload(c), c) << to_yaml(c);
  }
  // Every key away from its default, so a field the YAML dropped or misread would show.
  const TrainConfig all = load_train_config(
      "", {"model.widths=[5,6]", "model.blocks=[1,3]", "model.in_channels=1", "model.num_classes=7",
           "model.init_from=w: 1.safetensors", "model.channels_last=true", "data.dataset=cifar10", "data.path=/data/c 10", "data.image_size=40",
           "data.batch_size=3", "data.num_workers=0", "data.shuffle=false", "data.augment=false",
           "data.synthetic_size=9", "optim.name=adamw", "optim.lr=0.1", "optim.momentum=0", "optim.nesterov=false",
           "optim.weight_decay=0.3", "optim.beta1=0.8", "optim.beta2=0.99", "optim.eps=1e-6",
           "sched.name=warmup_cosine", "sched.warmup_steps=7", "sched.min_lr=0.001", "train.epochs=2",
           "train.max_steps=11", "train.grad_accum_steps=2", "train.seed=0", "train.log_interval=3",
           "train.device=cuda", "train.threads=2", "train.eval_batch_size=17", "amp.enabled=true",
           "amp.dtype=bf16", "checkpoint.dir=ck", "checkpoint.save_every=0", "checkpoint.resume_from=ck/last",
           "dist.backend=nccl", "dist.bucket_cap_mb=1.5", "dist.timeout_s=9", "dist.grad_compression=bf16", "output.dir=out",
           "profile.enabled=true"});
  EXPECT_EQ(all.model.init_from, "w: 1.safetensors");
  const TrainConfig again = reload(all);
  EXPECT_EQ(again, all) << to_yaml(all);
  EXPECT_EQ(to_yaml(again), to_yaml(all));
  // Each group in its own struct compares equal too, so a failure above points at one group.
  EXPECT_EQ(again.model, all.model);
  EXPECT_EQ(again.optim, all.optim);
  EXPECT_EQ(again.train, all.train);
}

TEST(TrainConfig, UnknownKeysSuggestTheNearestOne) {
  expect_mentions(error_of({"optim.lrr=0.1"}), {"'optim.lrr'", "command line", "did you mean 'optim.lr'"});
  const std::string path = write("optim:\n  lr: 0.1\n  lrr: 0.2\n");
  expect_mentions(error_of({}, path), {"'optim.lrr'", path + ":3", "did you mean 'optim.lr'"});
  expect_mentions(error_of({}, write("optm:\n  lr: 0.1\n")), {"'optm'", "did you mean 'optim'"});
}

TEST(TrainConfig, BadValuesNameTheKey) {
  expect_mentions(error_of({"data.batch_size=abc"}), {"'data.batch_size'", "expected int", "'abc'"});
  expect_mentions(error_of({"data.batch_size=0"}), {"'data.batch_size'", "out of range", "[1, 65536]"});
  expect_mentions(error_of({"amp.dtype=fp8"}), {"'amp.dtype'", "fp16, bf16"});
  expect_mentions(error_of({"data.dataset=imagenet"}), {"'data.dataset'", "fashion_mnist, cifar10, synthetic"});
  expect_mentions(error_of({"model.widths=[16,0,64]"}), {"'model.widths'", "[1, 4096]"});
  expect_mentions(error_of({"model.widths=[]", "model.blocks=[]"}), {"'model.widths'", "at least one stage"});
  expect_mentions(error_of({"dist.bucket_cap_mb=0"}), {"'dist.bucket_cap_mb'", "> 0"});
  expect_mentions(error_of({"optim.beta2=1"}), {"'optim.beta2'", "< 1"});
  expect_mentions(error_of({"train.grad_accum_steps=0"}), {"'train.grad_accum_steps'", "out of range"});
}

// Issue 26: `model.blocks: [2, 2, 99999999999]` passed, then its allocations ended the trainer in
// std::terminate. Every size has an upper bound, the error names the key and the bound, and the
// bound itself is allowed.
TEST(TrainConfig, EverySizeHasAnUpperBoundThatItsErrorNames) {
  struct Case {
    std::vector<std::string> past, at;
    std::string bound;
  };
  const std::vector<Case> cases{
      {{"model.blocks=[2,2,99999999999]"}, {"model.widths=[4]", "model.blocks=[256]"}, "[1, 256]"},
      {{"model.widths=[16,32,4097]"}, {"model.widths=[4096]", "model.blocks=[1]"}, "[1, 4096]"},
      {{"model.in_channels=1025"}, {"model.in_channels=1024"}, "[0, 1024]"},
      {{"model.num_classes=1048577"}, {"model.num_classes=1048576"}, "[2, 1048576]"},
      {{"data.image_size=4097"}, {"data.image_size=4096"}, "[0, 4096]"},
      {{"data.batch_size=65537"}, {"data.batch_size=65536"}, "[1, 65536]"},
      {{"train.eval_batch_size=65537"}, {"train.eval_batch_size=65536"}, "[1, 65536]"},
      {{"data.num_workers=257"}, {"data.num_workers=256"}, "[0, 256]"},
      {{"data.synthetic_size=100000001"}, {"data.synthetic_size=100000000"}, "[1, 100000000]"},
      {{"train.grad_accum_steps=4097"}, {"train.grad_accum_steps=4096"}, "[1, 4096]"},
      {{"train.threads=1025"}, {"train.threads=1024"}, "[0, 1024]"},
      {{"dist.bucket_cap_mb=1e300"}, {"dist.bucket_cap_mb=65536"}, "<= 65536"},
      {{"dist.timeout_s=1e300"}, {"dist.timeout_s=604800"}, "[1, 604800]"},
      {{"dist.modeled_world_size=65537"}, {"dist.modeled_world_size=65536"}, "[2, 65536]"},
      // Issue 38: counts of steps and epochs, whose products overflowed int64.
      {{"train.epochs=1000001"}, {"train.epochs=1000000"}, "[1, 1000000]"},
      {{"train.max_steps=1000000000000001"}, {"train.max_steps=1000000000000000"}, "[0, 1000000000000000]"},
      {{"train.log_interval=1000000000000001"}, {"train.log_interval=1000000000000000"}, "[1, 1000000000000000]"},
      {{"sched.warmup_steps=1000000000000001"}, {"sched.warmup_steps=1000000000000000"}, "[0, 1000000000000000]"},
      {{"checkpoint.save_every=1000001"}, {"checkpoint.save_every=1000000"}, "[0, 1000000]"},
  };
  for (const Case& k : cases) {
    const std::string key = k.past[0].substr(0, k.past[0].find('='));
    expect_mentions(error_of(k.past), {"'" + key + "'", "out of range", "(allowed: " + k.bound + ")"});
    EXPECT_EQ(error_of(k.at), "") << k.at.back();
  }
}

// Issue 38: each stage's width and depth were bounded, the number of stages was not (width 1 in
// a million stages is a small model with a backward graph millions of nodes deep).
TEST(TrainConfig, TheNumberOfStagesIsBounded) {
  auto ones = [](size_t n) {
    std::string list = "[";
    for (size_t i = 0; i < n; ++i) list += i ? ",1" : "1";
    return list + "]";
  };
  expect_mentions(error_of({"model.widths=" + ones(33), "model.blocks=" + ones(33)}),
                  {"'model.widths'", "has 33 stages; at most 32 are allowed"});
  EXPECT_EQ(error_of({"model.widths=" + ones(32), "model.blocks=" + ones(32)}), "");
}

// Each key in bounds, widths, blocks and classes can still multiply to a model no process holds:
// refused by its parameter count, naming the keys, the count and the limit.
TEST(TrainConfig, AModelTooLargeToHoldIsRefusedByItsParameterCount) {
  expect_mentions(error_of({"model.widths=[4096,4096]", "model.blocks=[16,16]"}),
                  {"command line: config key 'model.widths': model.widths (command line), model.blocks (command "
                   "line) and model.num_classes (default) make a model of 9.681e+09 parameters",
                   "36.06 GiB of float32 weights", "over the limit of 1073741824 parameters"});
  // The default widths stay below the limit with any blocks and classes in bounds.
  EXPECT_EQ(error_of({"model.blocks=[256,256,256]", "model.num_classes=1048576"}), "");
  expect_mentions(error_of({"model.widths=[2048]", "model.blocks=[1]", "model.num_classes=1048576"}),
                  {"'model.widths'", "model.num_classes (command line)", "over the limit"});
  const std::string path = write("model:\n  num_classes: 1048576\n  widths: [2048]\n  blocks: [1]\n");
  expect_mentions(error_of({}, path), {path + ":3: config key 'model.widths'", "model.num_classes (" + path + ":2)"});
  EXPECT_EQ(error_of({"model.widths=[1024,1024]", "model.blocks=[8,8]"}), "");  // 1.5e8 parameters
}

TEST(TrainConfig, InconsistentKeysFailNamingThem) {
  expect_mentions(error_of({"model.widths=[16,32]"}), {"'model.widths'", "command line", "2 stages", "model.blocks (default) has 3"});
  const std::string cpu = shipped("fashion_mnist_cpu.yaml");
  expect_mentions(error_of({"model.blocks=[1,1]"}, cpu), {"'model.widths'", cpu + ":", "model.blocks (command line) has 2"});
  expect_mentions(error_of({"optim.nesterov=true", "optim.momentum=0"}), {"'optim.nesterov'", "momentum > 0"});
  expect_mentions(error_of({"sched.min_lr=0.5"}), {"'sched.min_lr'", "optim.lr"});
  expect_mentions(error_of({"train.device=cpu", "amp.enabled=true"}), {"'amp.enabled'", "cuda"});
  expect_mentions(error_of({"train.device=cpu", "dist.backend=nccl"}), {"'dist.backend'", "gloo"});
  expect_mentions(error_of({"train.device=cpu", "data.gpu_resident=true"}), {"'data.gpu_resident'", "cuda"});
  // The GPU config stays valid with AMP off, and the CPU one turns invalid with it on.
  EXPECT_EQ(error_of({"amp.enabled=false"}, shipped("fashion_mnist.yaml")), "");
  expect_mentions(error_of({"amp.enabled=true"}, shipped("fashion_mnist_cpu.yaml")), {"'amp.enabled'"});
}

// Switching a variant (schedule, optimizer, dataset, modeled backend) leaves the other variant's
// keys without effect: one warning each, naming the key, where it was set and why; no error.
TEST(TrainConfig, KeysOfAnotherVariantWarnOnce) {
  const std::string cpu = shipped("fashion_mnist_cpu.yaml");
  std::vector<std::string> warnings;
  TrainConfig c = load_train_config(cpu, {"sched.name=constant"}, &warnings);
  EXPECT_EQ(c.sched.name, nn::ScheduleKind::constant);
  ASSERT_EQ(warnings.size(), 1u) << ::testing::PrintToString(warnings);  // min_lr is 0.0, its default
  expect_mentions(warnings[0], {"'sched.warmup_steps'", cpu + ":", "sched.name=warmup_cosine", "constant",
                                "command line"});
  c = load_train_config(cpu, {"optim.name=adamw", "optim.beta1=0.8"}, &warnings);
  EXPECT_EQ(c.optim.name, OptimizerName::adamw);
  ASSERT_EQ(warnings.size(), 1u) << ::testing::PrintToString(warnings);  // nesterov; momentum 0.9 is the default
  expect_mentions(warnings[0], {"'optim.nesterov'", "optim.name=sgd", "adamw"});
  load_train_config("", {"optim.beta2=0.99", "optim.momentum=0.5", "sched.warmup_steps=3"}, &warnings);
  ASSERT_EQ(warnings.size(), 2u) << ::testing::PrintToString(warnings);
  expect_mentions(warnings[0], {"'sched.warmup_steps'", "(default)"});
  expect_mentions(warnings[1], {"'optim.beta2'", "optim.name=adamw", "sgd"});
  load_train_config("", {"data.synthetic_size=10", "dist.modeled_world_size=4"}, &warnings);
  ASSERT_EQ(warnings.size(), 2u) << ::testing::PrintToString(warnings);
  expect_mentions(warnings[0], {"'data.synthetic_size'", "data.dataset=synthetic"});
  expect_mentions(warnings[1], {"'dist.modeled_world_size'", "dist.backend=modeled"});
  // The chosen variant reading its own keys, or a key left at its default, warns of nothing.
  load_train_config(cpu, {}, &warnings);
  EXPECT_TRUE(warnings.empty()) << ::testing::PrintToString(warnings);
  load_train_config(shipped("fashion_mnist.yaml"), {}, &warnings);
  EXPECT_TRUE(warnings.empty()) << ::testing::PrintToString(warnings);
  // Errors stay errors under any variant.
  expect_mentions(error_of({"sched.name=constant", "sched.warmup_steps=-1"}), {"'sched.warmup_steps'", "out of range"});
  expect_mentions(error_of({"optim.name=sgd", "optim.beta1=abc"}), {"'optim.beta1'", "expected float"});
}

TEST(TrainConfig, HelpListsEveryKey) {
  const std::string h = train_config_help();
  const std::vector<std::string> keys = {
      "model.widths", "model.blocks", "model.in_channels", "model.num_classes", "model.init_from",
      "model.channels_last", "model.sync_batchnorm", "data.dataset", "data.path", "data.image_size", "data.batch_size", "data.num_workers", "data.shuffle",
      "data.augment", "data.synthetic_size", "data.gpu_resident", "optim.name", "optim.lr", "optim.momentum", "optim.nesterov",
      "optim.weight_decay", "optim.beta1", "optim.beta2", "optim.eps", "optim.zero_sharding", "sched.name",
      "sched.warmup_steps",
      "sched.min_lr", "train.epochs", "train.max_steps", "train.grad_accum_steps", "train.seed",
      "train.log_interval", "train.device", "train.threads", "train.eval_batch_size", "train.target_accuracy",
      "train.cuda_graph",
      "amp.enabled", "amp.dtype", "kernels.conv", "kernels.batch_norm", "kernels.cudnn_algo_search", "kernels.cudnn_deterministic", "kernels.cpu_conv", "checkpoint.dir", "checkpoint.save_every", "checkpoint.resume_from", "checkpoint.format", "dist.backend", "dist.bucket_cap_mb", "dist.sharding", "dist.param_dtype",
      "dist.timeout_s", "dist.modeled_world_size", "dist.modeled_link", "dist.grad_compression", "output.dir", "profile.enabled"};
  for (const auto& k : keys) EXPECT_NE(h.find("  " + k + " "), std::string::npos) << k << "\n" << h;
  EXPECT_EQ(size_t(std::count(h.begin(), h.end(), '\n')), keys.size()) << "a key the list above misses:\n" << h;
  expect_mentions(h, {"one of fashion_mnist|cifar10|synthetic", "one of sgd|adamw", "one of fp16|bf16",
                      "one of constant|cosine|warmup_cosine", "one of auto|cpu|cuda", "one of auto|nccl|gloo|modeled",
                      "one of auto|cudnn|native", "one of timed|heuristic", "one of auto|im2col|winograd",
                      "one of nvlink|infiniband", "one of none|fp16|bf16", "one of full|sharded"});
}

// SyncBatchNorm combines statistics outside the kernels, which cuDNN's batch norm cannot take.
TEST(TrainConfig, SyncBatchNormIsABoolAndRefusesCudnnBatchNorm) {
  EXPECT_FALSE(load_train_config("", {}).model.sync_batchnorm);
  EXPECT_TRUE(load_train_config("", {"model.sync_batchnorm=true"}).model.sync_batchnorm);
  expect_mentions(error_of({"model.sync_batchnorm=maybe"}), {"'model.sync_batchnorm'"});
  expect_mentions(error_of({"model.sync_batchnorm=true", "kernels.batch_norm=cudnn"}),
                  {"'model.sync_batchnorm'", "kernels.batch_norm=native"});
  // The CPU never uses cuDNN, so the pair is harmless there.
  EXPECT_TRUE(load_train_config("", {"model.sync_batchnorm=true", "kernels.batch_norm=cudnn", "train.device=cpu"})
                  .model.sync_batchnorm);
}

}  // namespace
}  // namespace cg::train
