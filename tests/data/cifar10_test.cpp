// The CIFAR-10 binary reader on small batch files written here: records, per-channel
// normalization, the nested folder the archive unpacks to, and truncated or corrupt files.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/cifar10.h"
#include "data_test_files.h"
#include "support/paths.h"

namespace cg::data {
namespace {
namespace fs = std::filesystem;
using test_files::error_of;
using test_files::write_file;

// `count` records; record i has label (i + first_label) % 10 and channel c filled with 10*i + c.
std::string records(int count, int first_label = 0) {
  std::string s;
  for (int i = 0; i < count; ++i) {
    s += char((i + first_label) % 10);
    for (int c = 0; c < 3; ++c) s += std::string(1024, char(10 * i + c));
  }
  return s;
}

TEST(Cifar10Reader, ReadsTestAndTrainSplits) {
  const auto dir = test::make_temp_dir("cifar");
  write_file(dir / "test_batch.bin", records(2, 3), false);
  ImageSet test = read_cifar10(dir.string(), Split::test);
  EXPECT_EQ(test.count, 2);
  EXPECT_EQ(test.channels, 3);
  EXPECT_EQ(test.height, 32);
  EXPECT_EQ(test.labels, (std::vector<uint8_t>{3, 4}));
  EXPECT_EQ(test.pixels[3072 + 2048], 12);  // image 1, channel 2

  // The train split: five files, read in order (one of them gzipped).
  for (int b = 1; b <= 5; ++b)
    write_file(dir / ("data_batch_" + std::to_string(b) + ".bin" + (b == 4 ? ".gz" : "")), records(b, b), b == 4);
  ImageSet train = read_cifar10(dir.string(), Split::train);
  EXPECT_EQ(train.count, 1 + 2 + 3 + 4 + 5);
  EXPECT_EQ(train.labels[0], 1);
  EXPECT_EQ(train.labels[1], 2);  // first record of data_batch_2
  EXPECT_EQ(train.labels[6], 4);  // first record of data_batch_4
}

TEST(Cifar10Reader, FindsTheArchiveFolder) {
  const auto dir = test::make_temp_dir("cifar_nested");
  fs::create_directory(dir / "cifar-10-batches-bin");
  write_file(dir / "cifar-10-batches-bin" / "test_batch.bin", records(1), false);
  EXPECT_EQ(read_cifar10(dir.string(), Split::test).count, 1);
}

TEST(Cifar10Reader, NormalizesPerChannel) {
  const auto dir = test::make_temp_dir("cifar_norm");
  write_file(dir / "test_batch.bin", records(2), false);
  auto ds = load_cifar10(dir.string(), Split::test, 36);
  EXPECT_EQ(ds->channels(), 3);
  EXPECT_EQ(ds->height(), 36);
  std::vector<float> img(size_t(ds->image_numel()));
  int64_t label = -1;
  ds->get(1, img.data(), &label);
  EXPECT_EQ(label, 1);
  for (int c = 0; c < 3; ++c) {
    const float* plane = img.data() + c * 36 * 36;
    EXPECT_NEAR(plane[0], -kCifar10Mean[c] / kCifar10Std[c], 1e-6) << "border of channel " << c;
    EXPECT_NEAR(plane[2 * 36 + 2], ((10 + c) / 255.f - kCifar10Mean[c]) / kCifar10Std[c], 1e-5) << c;
    EXPECT_NEAR(plane[33 * 36 + 33], ((10 + c) / 255.f - kCifar10Mean[c]) / kCifar10Std[c], 1e-5) << c;
    EXPECT_NEAR(plane[34 * 36 + 34], -kCifar10Mean[c] / kCifar10Std[c], 1e-6) << c;
  }
  const std::string err = error_of([&] { load_cifar10(dir.string(), Split::test, 28); });
  EXPECT_NE(err.find("28"), std::string::npos) << err;
  EXPECT_NE(err.find("32x32"), std::string::npos) << err;
}

TEST(Cifar10Reader, DamagedFilesNameTheCause) {
  const auto dir = test::make_temp_dir("cifar_bad");
  std::string err = error_of([&] { read_cifar10(dir.string(), Split::test); });
  EXPECT_NE(err.find("test_batch.bin"), std::string::npos) << err;
  EXPECT_NE(err.find("not found"), std::string::npos) << err;

  const fs::path path = dir / "test_batch.bin";
  write_file(path, records(2).substr(0, 4000), false);  // one whole record and 927 bytes
  err = error_of([&] { read_cifar10(dir.string(), Split::test); });
  EXPECT_NE(err.find(path.string()), std::string::npos) << err;
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
  EXPECT_NE(err.find("expected 6146 bytes, found 4000"), std::string::npos) << err;

  write_file(path, "", false);
  EXPECT_NE(error_of([&] { read_cifar10(dir.string(), Split::test); }).find("empty"), std::string::npos);

  std::string bad = records(2);
  bad[3073] = char(12);  // second record's label
  write_file(path, bad, false);
  err = error_of([&] { read_cifar10(dir.string(), Split::test); });
  EXPECT_NE(err.find("record 1 has label 12"), std::string::npos) << err;

  // Only some of the training files present: the first missing one is named before any reading.
  write_file(dir / "data_batch_1.bin", records(1), false);
  err = error_of([&] { read_cifar10(dir.string(), Split::train); });
  EXPECT_NE(err.find("data_batch_2.bin"), std::string::npos) << err;
}

}  // namespace
}  // namespace cg::data
