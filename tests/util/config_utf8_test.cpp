// Config strings must be UTF-8: the resolved config is stored as YAML (config.yaml, checkpoint
// metadata), and other bytes would come back altered. Found by fuzz_train_config.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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

// yaml-cpp takes a NUL among the first bytes for UTF-16 and decodes the rest so (fuzz finding
// fuzz/regressions/fuzz_train_config/nul_utf16_path): refused, in an override and in a file.
TEST(ConfigUtf8, RejectsANulByteInAnOverrideNamingTheKey) {
  const std::string e = error_for(std::string("\x01\0tr", 4));
  EXPECT_NE(e.find("output.dir"), std::string::npos) << e;
  EXPECT_NE(e.find("NUL"), std::string::npos) << e;
}

TEST(ConfigUtf8, RejectsANulByteInAFileNamingFileAndLine) {
  const auto path = std::filesystem::temp_directory_path() / "cudagrad_config_nul_test.yaml";
  {
    std::ofstream out(path, std::ios::binary);
    out << "output:\n  dir: " << std::string("a\0b", 3) << "\n";
  }
  std::string e;
  try {
    load(one_string_key(), path.string(), {});
  } catch (const UsageError& err) {
    e = err.what();
  }
  std::filesystem::remove(path);
  EXPECT_NE(e.find(path.string() + ":2"), std::string::npos) << e;
  EXPECT_NE(e.find("NUL"), std::string::npos) << e;
}

}  // namespace
}  // namespace cg::config
