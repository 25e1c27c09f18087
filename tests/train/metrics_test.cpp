// metrics.jsonl: lines are appended and flushed one by one, and a line that cannot be written
// stops the run naming the file and the cause, instead of being lost.
#include <gtest/gtest.h>

#include <filesystem>
#include <cstring>
#include <fstream>

#include "support/paths.h"
#include "train/metrics.h"
#include "util/check.h"

namespace cg::train {
namespace {

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(MetricsWriter, AppendsFlushedLinesAndKeepsThemOnResume) {
  const std::string path = (test::make_temp_dir("metrics") / "metrics.jsonl").string();
  {
    MetricsWriter w(path, MetricsWriter::Mode::truncate);
    w.write({{"step", 1}});
    EXPECT_EQ(lines_of(path).size(), 1u) << "each line is on disk once write() returns";
  }
  MetricsWriter w(path, MetricsWriter::Mode::append);
  w.write({{"kind", "resume"}});
  EXPECT_EQ(lines_of(path), (std::vector<std::string>{R"({"step":1})", R"({"kind":"resume"})"}));
  MetricsWriter disabled;
  EXPECT_NO_THROW(disabled.write({{"step", 2}}));
}

// /dev/full accepts the open and fails every write with ENOSPC, as a full disk does.
TEST(MetricsWriter, AFullDiskStopsTheRunNamingTheFile) {
  MetricsWriter w("/dev/full", MetricsWriter::Mode::truncate);
  try {
    w.write({{"kind", "train"}, {"step", 1}});
    FAIL() << "a line written to a full disk was silently lost";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/full"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(std::strerror(ENOSPC)), std::string::npos) << e.what();
  }
}

TEST(MetricsWriter, AFolderThatIsNotThereIsAClearError) {
  EXPECT_THROW(MetricsWriter("/nonexistent/dir/metrics.jsonl", MetricsWriter::Mode::truncate), Error);
}

}  // namespace
}  // namespace cg::train
