// A dataset file replaced by a truncated copy between epochs. The trainer reads its data once, at
// start, so the running job is unaffected and finishes; the next start (a resume) must refuse the
// damaged file with an error naming it, instead of training on part of the data.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/processes.h"

namespace cg {
namespace {
namespace fs = std::filesystem;

std::string be32(uint32_t v) { return {char(v >> 24), char((v >> 16) & 0xff), char((v >> 8) & 0xff), char(v & 0xff)}; }

// A Fashion-MNIST-shaped split: n images of 28x28 and their labels.
void write_split(const fs::path& dir, const std::string& prefix, uint32_t n) {
  std::string images = std::string("\0\0\x08\x03", 4) + be32(n) + be32(28) + be32(28);
  for (uint32_t i = 0; i < n * 28 * 28; ++i) images.push_back(char((i * 7 + i / 784 * 13) & 0xff));
  std::string labels = std::string("\0\0\x08\x01", 4) + be32(n);
  for (uint32_t i = 0; i < n; ++i) labels.push_back(char(i % 10));
  std::ofstream(dir / (prefix + "-images-idx3-ubyte"), std::ios::binary) << images;
  std::ofstream(dir / (prefix + "-labels-idx1-ubyte"), std::ios::binary) << labels;
}

TEST(FaultData, ADataFileTruncatedBetweenEpochsIsRefusedOnResume) {
  const auto dir = test::make_temp_dir("fault_data");
  const fs::path data = dir / "data", out = dir / "out";
  fs::create_directories(data);
  write_split(data, "train", 64);
  write_split(data, "t10k", 32);
  const std::string args = test::app("cudagrad-train") + " data.dataset=fashion_mnist data.path=" + data.string() +
                           " data.batch_size=16 data.num_workers=0 model.in_channels=1 model.widths=[4,8] "
                           "model.blocks=[1,1] train.device=cpu train.threads=1 train.epochs=20 "
                           "checkpoint.save_every=1 output.dir=" + out.string();
  const pid_t pid = test::start(args, dir / "run.log");
  const fs::path first = out / "checkpoints" / "epoch_1.safetensors";
  for (int i = 0; i < 1200 && !fs::exists(first); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_TRUE(fs::exists(first)) << test::read_text(dir / "run.log");

  // Replace the training images with a copy cut off mid-image (written aside, then renamed over).
  const fs::path images = data / "train-images-idx3-ubyte";
  const std::string whole = test::read_text(images);
  std::ofstream(data / "cut", std::ios::binary) << whole.substr(0, whole.size() - 1000);
  fs::rename(data / "cut", images);

  EXPECT_EQ(test::wait_for(pid, std::chrono::seconds(180)), 0) << test::read_text(dir / "run.log");

  const int rc = test::wait_for(test::start(args + " checkpoint.resume_from=" + first.string(), dir / "resume.log"),
                                std::chrono::seconds(60));
  const std::string log = test::read_text(dir / "resume.log");
  EXPECT_EQ(rc, 1) << log;
  EXPECT_NE(log.find(images.string() + " is truncated or corrupt"), std::string::npos) << log;
  EXPECT_EQ(log.find("resumed from"), std::string::npos) << "trained on a damaged data set\n" << log;
}

}  // namespace
}  // namespace cg
