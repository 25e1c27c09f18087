// Dataset readers on small files written here (gzipped and plain), the damaged variants, and the
// real Fashion-MNIST when it is installed.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "data/dataset_factory.h"
#include "data/readers.h"
#include "support/paths.h"
#include "util/check.h"

namespace cg::data {
namespace {
namespace fs = std::filesystem;

std::string be32(uint32_t v) {
  return {char(v >> 24), char((v >> 16) & 0xff), char((v >> 8) & 0xff), char(v & 0xff)};
}

void write_file(const fs::path& p, const std::string& bytes, bool gz) {
  if (gz) {
    gzFile f = gzopen(p.string().c_str(), "wb");
    gzwrite(f, bytes.data(), unsigned(bytes.size()));
    gzclose(f);
  } else {
    std::ofstream(p, std::ios::binary) << bytes;
  }
}

// A 3-image, 2x2 IDX pair for the split; pixel values 0..11, labels 0,1,2.
void write_idx(const fs::path& dir, bool gz, const std::string& prefix = "t10k") {
  std::string img = be32(0x803) + be32(3) + be32(2) + be32(2), lab = be32(0x801) + be32(3);
  for (int i = 0; i < 12; ++i) img += char(i * 20);
  for (int i = 0; i < 3; ++i) lab += char(i);
  const std::string ext = gz ? ".gz" : "";
  write_file(dir / (prefix + "-images-idx3-ubyte" + ext), img, gz);
  write_file(dir / (prefix + "-labels-idx1-ubyte" + ext), lab, gz);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(IdxReader, ReadsGzippedAndPlainFiles) {
  for (bool gz : {true, false}) {
    const auto dir = test::make_temp_dir("idx");
    write_idx(dir, gz);
    ImageSet s = read_idx_split(dir.string(), false);
    EXPECT_EQ(s.count, 3);
    EXPECT_EQ(s.height, 2);
    EXPECT_EQ(s.pixels[5], 100);
    EXPECT_EQ(s.labels[2], 2);
  }
}

TEST(IdxReader, NormalizesAndPads) {
  const auto dir = test::make_temp_dir("idx_norm");
  write_idx(dir, true);
  DatasetOptions o;
  o.path = dir.string();
  o.train = false;
  o.image_size = 4;
  auto ds = make_dataset(o);
  EXPECT_EQ(ds->height(), 4);
  std::vector<float> img(16);
  int64_t label = -1;
  ds->get(1, img.data(), &label);
  EXPECT_EQ(label, 1);
  EXPECT_NEAR(img[0], -0.2860f / 0.3530f, 1e-6);                  // padding: a black pixel
  EXPECT_NEAR(img[5], (80 / 255.f - 0.2860f) / 0.3530f, 1e-5);     // first real pixel of image 1
  o.image_size = 1;
  EXPECT_NE(error_of([&] { make_dataset(o); }).find("smaller"), std::string::npos);
}

TEST(IdxReader, DamagedFilesNameTheCause) {
  const auto dir = test::make_temp_dir("idx_bad");
  EXPECT_NE(error_of([&] { read_idx_split(dir.string(), false); }).find("not found"), std::string::npos);
  write_idx(dir, false);
  const auto images = dir / "t10k-images-idx3-ubyte";
  fs::resize_file(images, 20);  // header promises 12 pixel bytes, 4 remain
  std::string err = error_of([&] { read_idx_split(dir.string(), false); });
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
  EXPECT_NE(err.find(images.string()), std::string::npos) << err;
  write_file(images, be32(0x1234) + std::string(12, '\0'), false);
  EXPECT_NE(error_of([&] { read_idx_split(dir.string(), false); }).find("magic"), std::string::npos);
  // A gzip stream cut in the middle.
  const auto gzdir = test::make_temp_dir("idx_gz");
  write_idx(gzdir, true);
  const auto gzimages = gzdir / "t10k-images-idx3-ubyte.gz";
  fs::resize_file(gzimages, fs::file_size(gzimages) - 6);
  err = error_of([&] { read_idx_split(gzdir.string(), false); });
  EXPECT_NE(err.find(gzimages.string()), std::string::npos) << err;
}

TEST(Cifar10Reader, ReadsRecordsAndRejectsTruncation) {
  const auto dir = test::make_temp_dir("cifar");
  std::string rec;
  for (int i = 0; i < 2; ++i) {
    rec += char(i + 3);
    rec += std::string(3072, char(i * 50));
  }
  write_file(dir / "test_batch.bin", rec, false);
  ImageSet s = read_cifar10_split(dir.string(), false);
  EXPECT_EQ(s.count, 2);
  EXPECT_EQ(s.channels, 3);
  EXPECT_EQ(s.labels[1], 4);
  EXPECT_EQ(s.pixels[3072], 50);
  write_file(dir / "test_batch.bin", rec.substr(0, 4000), false);
  EXPECT_NE(error_of([&] { read_cifar10_split(dir.string(), false); }).find("truncated"), std::string::npos);
}

TEST(FashionMnist, RealDataWhenInstalled) {
  const std::string dir = default_data_path(DatasetKind::fashion_mnist);
  if (!fs::exists(fs::path(dir) / "train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "needs Fashion-MNIST at " << dir << " (apt-get install dataset-fashion-mnist)";
  DatasetOptions o;
  auto train = make_dataset(o);
  o.train = false;
  auto test = make_dataset(o);
  EXPECT_EQ(train->size(), 60000);
  EXPECT_EQ(test->size(), 10000);
  EXPECT_EQ(train->height(), 28);
  std::vector<int64_t> counts(10, 0);
  std::vector<float> img(784);
  double sum = 0;
  for (int64_t i = 0; i < test->size(); ++i) {
    int64_t label;
    test->get(i, img.data(), &label);
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 10);
    ++counts[size_t(label)];
    for (float v : img) sum += v;
  }
  for (int64_t c : counts) EXPECT_EQ(c, 1000);  // the test split is balanced
  EXPECT_NEAR(sum / (10000.0 * 784), 0.0, 0.05);  // normalized with the dataset's mean
}

}  // namespace
}  // namespace cg::data
