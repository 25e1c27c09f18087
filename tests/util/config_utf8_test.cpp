// Config strings must be UTF-8: the resolved config is stored as YAML (config.yaml, checkpoint
// metadata), and other bytes would come back altered. Found by fuzz_train_config.
#include <gtest/gtest.h>

#include "util/check.h"
#include "util/config.h"

namespace cg::config {
namespace {

Schema one_string_key() {
  Schema s;
  s.add({.name = "output.dir", .kind = Kind::string, .default_value = std::string("runs"), .help = "where"});
  return s;
}

std::string error_for(const std::string& value) {
  try {
    load(one_string_key(), "", {"output.dir=" + value});
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigUtf8, AcceptsUtf8Text) {
  EXPECT_EQ(error_for("runs/caf\xc3\xa9"), "");
  EXPECT_EQ(error_for("\xf0\x9f\x98\x80"), "");  // four bytes
  EXPECT_EQ(error_for("tab\there"), "");
}

TEST(ConfigUtf8, RejectsOtherBytesNamingTheKey) {
  for (const std::string bad : {"tr\x91\x91", "cut\xc3", "\xc0\xaf" /* overlong '/' */, "\xed\xa0\x80" /* surrogate */,
                                "\xf4\x90\x80\x80" /* past U+10FFFF */}) {
    const std::string e = error_for(bad);
    EXPECT_NE(e.find("output.dir"), std::string::npos) << e;
    EXPECT_NE(e.find("not valid UTF-8"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace cg::config
