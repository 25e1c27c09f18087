// dist.sharding: no_shard by default, each built strategy accepted and written into the resolved
// YAML (which the ranks compare at start-up, so they must agree on it), hybrid_shard's combinations
// not built (16-bit compression, a modeled ring that is not whole 8-GPU nodes) refused naming the key, a bad value refused
// naming the key, and its help. optim.zero_sharding=true is
// the older name of dist.sharding=optimizer: it sets that, says so, leaves only the new key in the
// resolved YAML, and is refused beside another strategy. Sharding combines with
// dist.grad_compression. And the data-parallel combinations the config alone shows cannot run
// are refused when it loads, naming both keys, and by cudagrad-train with exit 2 before any work:
// compression over Gloo staged through host memory (dist.backend=gloo with train.device=cuda; it
// has the ring's halves, so sharding is accepted there), sharding in a CUDA graph, SyncBatchNorm with cuDNN's batch norm, and a
// synthetic training split smaller than one batch.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "support/messages.h"
#include "support/processes.h"
#include "train/train_config.h"
#include "util/check.h"

namespace cg::train {
namespace {

using dist::Sharding;

TEST(ShardingConfig, NoShardByDefaultEachBuiltStrategyWhenAskedAndInTheResolvedYaml) {
  EXPECT_EQ(load_train_config("", {}).dist.sharding, Sharding::no_shard);
  for (const char* s : {"no_shard", "optimizer", "shard_grad_op", "full_shard", "hybrid_shard"}) {
    const TrainConfig c = load_train_config("", {std::string("dist.sharding=") + s});
    EXPECT_STREQ(enum_name(c.dist.sharding), s);
    const std::string yaml = to_yaml(c);
    EXPECT_NE(yaml.find(std::string("sharding: ") + s), std::string::npos) << yaml;
  }
}

TEST(ShardingConfig, ZeroShardingIsTheOlderNameOfOptimizerAndSaysSo) {
  std::vector<std::string> warnings;
  const TrainConfig c = load_train_config("", {"optim.zero_sharding=true"}, &warnings);
  EXPECT_EQ(c.dist.sharding, Sharding::optimizer);
  EXPECT_FALSE(c.optim.zero_sharding) << "the resolved config carries the new key only";
  EXPECT_EQ(c, load_train_config("", {"dist.sharding=optimizer"}));
  ASSERT_EQ(warnings.size(), 1u);
  test::expect_mentions(warnings[0], {"'optim.zero_sharding'", "older name", "dist.sharding=optimizer"});
  EXPECT_EQ(load_train_config("", {"optim.zero_sharding=false"}), load_train_config("", {}));
  // Beside the same strategy it is redundant, beside another a contradiction.
  EXPECT_EQ(load_train_config("", {"optim.zero_sharding=true", "dist.sharding=optimizer"}).dist.sharding,
            Sharding::optimizer);
  try {
    load_train_config("", {"optim.zero_sharding=true", "dist.sharding=shard_grad_op"});
    FAIL() << "accepted two strategies";
  } catch (const UsageError& e) {
    test::expect_mentions(e.what(), {"'optim.zero_sharding'", "dist.sharding=shard_grad_op", "keep dist.sharding"});
  }
}

TEST(ShardingConfig, BadValuesAndCombinationsNotBuiltNameTheKeyAndTheHelpExplainsThem) {
  EXPECT_EQ(load_train_config("", {"dist.sharding=hybrid_shard"}).dist.sharding, dist::Sharding::hybrid_shard);
  for (const auto& [settings, mentions] : std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>>{
           {{"optim.zero_sharding=sometimes"}, {"'optim.zero_sharding'", "sometimes"}},
           {{"dist.sharding=zero9"}, {"'dist.sharding'", "zero9", "shard_grad_op"}},
           {{"dist.sharding=hybrid_shard", "dist.grad_compression=bf16"},
            {"'dist.sharding'", "hybrid_shard reduces gradients in float32", "dist.grad_compression=bf16"}},
           {{"dist.sharding=hybrid_shard", "dist.backend=modeled"},
            {"'dist.sharding'", "models nodes of 8 GPUs", "dist.modeled_world_size=8 (default)"}},
           {{"dist.param_dtype=bf16"}, {"'dist.param_dtype'", "dist.sharding=no_shard (default)", "never gathers"}},
           {{"dist.param_dtype=fp16", "dist.sharding=shard_grad_op"},
            {"'dist.param_dtype'", "dist.sharding=shard_grad_op (command line)"}},
           {{"dist.sharding=hybrid_shard", "dist.backend=modeled", "dist.modeled_world_size=20"},
            {"'dist.sharding'", "dist.modeled_world_size=20 (command line)", "use 16, 24, 32"}}}) {
    SCOPED_TRACE(settings.front());
    try {
      load_train_config("", settings);
      FAIL() << "accepted";
    } catch (const UsageError& e) {
      for (const std::string& m : mentions) test::expect_mentions(e.what(), {m});
    }
  }
  test::expect_mentions(train_config_help(),
                        {"optim.zero_sharding", "dist.sharding", "ZeRO-1", "ZeRO-2", "ZeRO-3", "reduce-scattered"});
}

// The modeled ring's one real rank owns every shard, so every strategy runs over it;
// hybrid_shard's two levels are whole 8-GPU nodes.
TEST(ShardingConfig, EveryStrategyRunsOverTheModeledRingHybridShardOnWholeNodes) {
  for (const char* s : {"optimizer", "shard_grad_op", "full_shard"})
    EXPECT_STREQ(enum_name(load_train_config("", {std::string("dist.sharding=") + s, "dist.backend=modeled"}).dist.sharding), s);
  EXPECT_EQ(load_train_config("", {"dist.sharding=hybrid_shard", "dist.backend=modeled", "dist.modeled_world_size=16"})
                .dist.sharding,
            Sharding::hybrid_shard);
}

// FSDP's MixedPrecision param_dtype, for the strategies that gather parameters before a forward
// (the others are refused in the table above).
TEST(ShardingConfig, ParamDTypeIsReadForTheStrategiesThatGather) {
  EXPECT_EQ(load_train_config("", {}).dist.param_dtype, dist::ParamDType::float32);
  for (const char* s : {"full_shard", "hybrid_shard"})
    EXPECT_EQ(load_train_config("", {std::string("dist.sharding=") + s, "dist.param_dtype=bf16"}).dist.param_dtype,
              dist::ParamDType::bf16);
}

std::string error_of(const std::vector<std::string>& overrides) {
  try {
    load_train_config("", overrides);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

// PyTorch runs ZeroRedundancyOptimizer and FSDP under 16-bit gradient reduction; so do we.
TEST(ShardingConfig, CombinesWithGradientCompression) {
  for (const char* s : {"optimizer", "shard_grad_op", "full_shard"})
    for (const char* c : {"fp16", "bf16"}) {
      const TrainConfig both =
          load_train_config("", {std::string("dist.sharding=") + s, std::string("dist.grad_compression=") + c});
      EXPECT_STREQ(enum_name(both.dist.sharding), s);
      EXPECT_STREQ(enum_name(both.dist.grad_compression), c);
    }
}

// Each refused combination: its overrides, the key the error is reported against, what else the
// message must name, and one change that makes it acceptable.
struct Refusal {
  std::vector<std::string> overrides;
  std::string key;
  std::vector<std::string> mentions;
  std::string fix;
};

std::vector<Refusal> refusals() {
  return {
      {{"dist.grad_compression=fp16", "dist.backend=gloo", "train.device=cuda"},
       "dist.grad_compression",
       {"dist.backend=gloo", "train.device=cuda", "16-bit all-reduce"},
       "dist.backend=auto"},
      {{"optim.zero_sharding=true", "train.cuda_graph=true", "train.device=cuda"},
       "train.cuda_graph",
       {"dist.sharding=optimizer"},
       "optim.zero_sharding=false"},
      {{"dist.sharding=shard_grad_op", "train.cuda_graph=true", "train.device=cuda"},
       "train.cuda_graph",
       {"dist.sharding=shard_grad_op"},
       "train.cuda_graph=auto"},
      {{"model.sync_batchnorm=true", "kernels.batch_norm=cudnn", "train.device=cuda"},
       "model.sync_batchnorm",
       {"kernels.batch_norm=cudnn", "kernels.batch_norm=native"},
       "kernels.batch_norm=native"},
      {{"data.dataset=synthetic", "data.synthetic_size=48", "data.batch_size=64"},
       "data.batch_size",
       {"data.synthetic_size", "48"},
       "data.batch_size=48"},
  };
}

TEST(DistConfig, CombinationsThatCannotRunAreRefusedNamingBothKeys) {
  for (const Refusal& r : refusals()) {
    SCOPED_TRACE(r.overrides.front() + " ... " + r.overrides.back());
    const std::string error = error_of(r.overrides);
    test::expect_mentions(error, {"command line: config key '" + r.key + "'"});
    for (const std::string& m : r.mentions) test::expect_mentions(error, {m});
    std::vector<std::string> fixed = r.overrides;
    fixed.push_back(r.fix);
    EXPECT_EQ(error_of(fixed), "") << "still refused with " << r.fix;
  }
  // Sharding over Gloo staged through host memory, and Gloo with CPU tensors: not refused.
  for (const char* s : {"optimizer", "shard_grad_op", "full_shard", "hybrid_shard"})
    EXPECT_EQ(error_of({std::string("dist.sharding=") + s, "dist.backend=gloo", "train.device=cuda"}), "") << s;
  EXPECT_EQ(error_of({"optim.zero_sharding=true", "dist.grad_compression=fp16", "dist.backend=gloo",
                      "train.device=cpu"}),
            "");
}

// cudagrad-train: exit 2 and the message, before any output directory is written.
TEST(DistConfig, CudagradTrainExitsTwoBeforeAnyWork) {
  const auto dir = test::make_temp_dir("dist_config_cli");
  int n = 0;
  for (const Refusal& r : refusals()) {
    const std::filesystem::path out = dir / ("out" + std::to_string(n)), log = dir / ("log" + std::to_string(n++) + ".txt");
    std::string cmd = test::app("cudagrad-train") + " output.dir=" + out.string();
    for (const std::string& o : r.overrides) cmd += " " + o;
    const int rc = test::wait_for(test::start(cmd, log), std::chrono::seconds(60));
    const std::string text = test::read_text(log);
    EXPECT_EQ(rc, 2) << cmd << "\n" << text;
    test::expect_mentions(text, {"'" + r.key + "'"});
    EXPECT_FALSE(std::filesystem::exists(out / "metrics.jsonl")) << cmd << ": it started training";
  }
}

}  // namespace
}  // namespace cg::train
