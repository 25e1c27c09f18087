// The IDX reader and the Fashion-MNIST loader on small files written here, gzipped and plain, and
// on damaged ones: each failure must be a cg::Error naming the file and the cause.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/fashion_mnist.h"
#include "data/idx_reader.h"
#include "data_test_files.h"
#include "support/paths.h"

namespace cg::data {
namespace {
namespace fs = std::filesystem;
using test_files::be32;
using test_files::error_of;
using test_files::write_file;

// 3 images of 2x2 pixels (values 0, 20, ..., 220) and labels 0, 1, 2.
std::string idx_images(uint32_t count = 3) {
  std::string s = be32(0x803) + be32(count) + be32(2) + be32(2);
  for (uint32_t i = 0; i < 4 * count; ++i) s += char(i * 20);
  return s;
}
std::string idx_labels(uint32_t count = 3, char first = 0) {
  std::string s = be32(0x801) + be32(count);
  for (uint32_t i = 0; i < count; ++i) s += char(first + char(i));
  return s;
}

void write_split(const fs::path& dir, bool gzip, const std::string& images = idx_images(),
                 const std::string& labels = idx_labels()) {
  const std::string ext = gzip ? ".gz" : "";
  write_file(dir / ("t10k-images-idx3-ubyte" + ext), images, gzip);
  write_file(dir / ("t10k-labels-idx1-ubyte" + ext), labels, gzip);
}

TEST(IdxReader, ReadsGzippedAndPlainFiles) {
  for (bool gzip : {true, false}) {
    const auto dir = test::make_temp_dir("idx");
    write_split(dir, gzip);
    const std::string ext = gzip ? ".gz" : "";
    IdxArray images = read_idx_ubyte((dir / ("t10k-images-idx3-ubyte" + ext)).string(), 3);
    EXPECT_EQ(images.dims, (std::vector<int64_t>{3, 2, 2}));
    ASSERT_EQ(images.data.size(), 12u);
    EXPECT_EQ(images.data[5], 100);
    ImageSet set = read_fashion_mnist(dir.string(), Split::test);
    EXPECT_EQ(set.count, 3);
    EXPECT_EQ(set.height, 2);
    EXPECT_EQ(set.width, 2);
    EXPECT_EQ(set.pixels[11], 220);
    EXPECT_EQ(set.labels[2], 2);
  }
}

TEST(IdxReader, MissingFileNamesThePath) {
  const auto dir = test::make_temp_dir("idx_missing");
  std::string err = error_of([&] { read_fashion_mnist(dir.string(), Split::test); });
  EXPECT_NE(err.find((dir / "t10k-images-idx3-ubyte").string()), std::string::npos) << err;
  EXPECT_NE(err.find("not found"), std::string::npos) << err;
  // Images present, labels missing: the labels file is named.
  write_file(dir / "t10k-images-idx3-ubyte", idx_images(), false);
  err = error_of([&] { read_fashion_mnist(dir.string(), Split::test); });
  EXPECT_NE(err.find("t10k-labels-idx1-ubyte"), std::string::npos) << err;
  err = error_of([&] { read_idx_ubyte((dir / "nothing-here").string(), 1); });
  EXPECT_NE(err.find("nothing-here"), std::string::npos) << err;
}

TEST(IdxReader, TruncatedPlainFileSaysExpectedAndFoundBytes) {
  const auto dir = test::make_temp_dir("idx_trunc");
  write_split(dir, false, idx_images().substr(0, 20));  // header (16) promises 12 pixel bytes, 4 remain
  const std::string path = (dir / "t10k-images-idx3-ubyte").string();
  const std::string err = error_of([&] { read_fashion_mnist(dir.string(), Split::test); });
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_NE(err.find("truncated"), std::string::npos) << err;
  EXPECT_NE(err.find("expected 28 bytes, found 20"), std::string::npos) << err;
  // Cut inside the header.
  write_file(path, idx_images().substr(0, 6), false);
  EXPECT_NE(error_of([&] { read_idx_ubyte(path, 3); }).find("expected 16 bytes, found 6"), std::string::npos);
}

TEST(IdxReader, TruncatedOrDamagedGzipStreamIsAnError) {
  const auto dir = test::make_temp_dir("idx_gz");
  // 4000 images of 2x2 so the stream is long enough to cut in the middle of the data.
  write_split(dir, true, idx_images(4000), idx_labels(1));
  const fs::path path = dir / "t10k-images-idx3-ubyte.gz";
  const auto size = fs::file_size(path);
  fs::resize_file(path, size / 2);
  std::string err = error_of([&] { read_idx_ubyte(path.string(), 3); });
  EXPECT_NE(err.find(path.string()), std::string::npos) << err;
  EXPECT_NE(err.find("expected 16016 bytes, found"), std::string::npos) << err;
  EXPECT_NE(err.find("gzip"), std::string::npos) << err;

  // All the data present but the gzip trailer (CRC and length) cut off.
  write_split(dir, true);
  fs::resize_file(path, fs::file_size(path) - 6);
  err = error_of([&] { read_idx_ubyte(path.string(), 3); });
  EXPECT_NE(err.find(path.string()), std::string::npos) << err;
  EXPECT_NE(err.find("gzip"), std::string::npos) << err;

  // A flipped byte in the compressed data: zlib's checks catch it.
  write_split(dir, true, idx_images(4000), idx_labels(1));
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(fs::file_size(path) / 2));
    f.put(char(0x5a));
  }
  err = error_of([&] { read_idx_ubyte(path.string(), 3); });
  EXPECT_NE(err.find(path.string()), std::string::npos) << err;
}

TEST(IdxReader, BadHeadersAreRejected) {
  const auto dir = test::make_temp_dir("idx_header");
  const std::string path = (dir / "t10k-images-idx3-ubyte").string();
  write_file(path, be32(0x12340803) + idx_images().substr(4), false);
  std::string err = error_of([&] { read_idx_ubyte(path, 3); });
  EXPECT_NE(err.find("magic"), std::string::npos) << err;
  EXPECT_NE(err.find(path), std::string::npos) << err;
  write_file(path, be32(0x0d03) + idx_images().substr(4), false);  // float elements
  EXPECT_NE(error_of([&] { read_idx_ubyte(path, 3); }).find("element type"), std::string::npos);
  write_file(path, idx_images(), false);
  EXPECT_NE(error_of([&] { read_idx_ubyte(path, 1); }).find("3 dimensions, expected 1"), std::string::npos);
  write_file(path, idx_images() + "xy", false);  // longer than the header says
  err = error_of([&] { read_idx_ubyte(path, 3); });
  EXPECT_NE(err.find("found more"), std::string::npos) << err;
  // A header promising 2^32 * 2^32 * 2^32 bytes: refused, not allocated.
  write_file(path, be32(0x803) + be32(0xffffffff) + be32(0xffffffff) + be32(0xffffffff), false);
  EXPECT_NE(error_of([&] { read_idx_ubyte(path, 3); }).find("2^40"), std::string::npos);
  // A header promising 1 GB with 12 bytes present: truncated, after reading what is there.
  write_file(path, be32(0x803) + be32(1 << 20) + be32(32) + be32(32) + std::string(12, '\0'), false);
  EXPECT_NE(error_of([&] { read_idx_ubyte(path, 3); }).find("found 28"), std::string::npos);
}

TEST(FashionMnistReader, ImagesAndLabelsMustAgree) {
  const auto dir = test::make_temp_dir("idx_agree");
  write_split(dir, false, idx_images(3), idx_labels(2));
  std::string err = error_of([&] { read_fashion_mnist(dir.string(), Split::test); });
  EXPECT_NE(err.find("3 images"), std::string::npos) << err;
  EXPECT_NE(err.find("2 labels"), std::string::npos) << err;
  write_split(dir, false, idx_images(3), idx_labels(3, 8));  // labels 8, 9, 10
  err = error_of([&] { read_fashion_mnist(dir.string(), Split::test); });
  EXPECT_NE(err.find("label 10"), std::string::npos) << err;
  EXPECT_NE(err.find("t10k-labels-idx1-ubyte"), std::string::npos) << err;
}

TEST(FashionMnistReader, NormalizesAndPadsWithBlack) {
  const auto dir = test::make_temp_dir("idx_norm");
  write_split(dir, true);
  auto native = load_fashion_mnist(dir.string(), Split::test, 0);
  EXPECT_EQ(native->height(), 2);
  std::vector<float> img(16);
  int64_t label = -1;
  native->get(1, img.data(), &label);
  EXPECT_EQ(label, 1);
  for (int i = 0; i < 4; ++i)
    EXPECT_NEAR(img[size_t(i)], ((4 + i) * 20 / 255.f - kFashionMnistMean) / kFashionMnistStd, 1e-5);

  auto padded = load_fashion_mnist(dir.string(), Split::test, 4);
  EXPECT_EQ(padded->height(), 4);
  EXPECT_EQ(padded->width(), 4);
  padded->get(1, img.data(), &label);
  const float black = -kFashionMnistMean / kFashionMnistStd;
  EXPECT_FLOAT_EQ(padded->black_level(0), black);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) {
      const float v = img[size_t(y * 4 + x)];
      if (y == 0 || y == 3 || x == 0 || x == 3) {
        EXPECT_FLOAT_EQ(v, black) << y << "," << x;
      } else {
        const int pixel = 4 + (y - 1) * 2 + (x - 1);
        EXPECT_NEAR(v, (pixel * 20 / 255.f - kFashionMnistMean) / kFashionMnistStd, 1e-5) << y << "," << x;
      }
    }
  const std::string err = error_of([&] { load_fashion_mnist(dir.string(), Split::test, 1); });
  EXPECT_NE(err.find("image_size 1"), std::string::npos) << err;
  EXPECT_NE(err.find("2x2"), std::string::npos) << err;
  EXPECT_NE(error_of([&] { padded->get(3, img.data(), &label); }).find("index 3"), std::string::npos);
}

}  // namespace
}  // namespace cg::data
