// optim.zero_sharding: a bool, false by default, written into the resolved YAML (which the ranks
// compare at start-up, so they must agree on it), a bad value refused naming the key, and its help.
#include <gtest/gtest.h>

#include "support/messages.h"
#include "train/train_config.h"
#include "util/check.h"

namespace cg::train {
namespace {

TEST(ZeroShardingConfig, OffByDefaultOnWhenAskedAndInTheResolvedYaml) {
  EXPECT_FALSE(load_train_config("", {}).optim.zero_sharding);
  const TrainConfig c = load_train_config("", {"optim.zero_sharding=true"});
  EXPECT_TRUE(c.optim.zero_sharding);
  const std::string yaml = to_yaml(c);
  EXPECT_NE(yaml.find("zero_sharding: true"), std::string::npos) << yaml;
  EXPECT_EQ(load_train_config("", {"optim.zero_sharding=false"}), load_train_config("", {}));
}

TEST(ZeroShardingConfig, ABadValueNamesTheKeyAndTheHelpExplainsIt) {
  try {
    load_train_config("", {"optim.zero_sharding=sometimes"});
    FAIL() << "accepted a non-boolean";
  } catch (const UsageError& e) {
    test::expect_mentions(e.what(), {"'optim.zero_sharding'", "sometimes"});
  }
  test::expect_mentions(train_config_help(), {"optim.zero_sharding", "ZeRO-1", "reduce-scattered"});
}

}  // namespace
}  // namespace cg::train
