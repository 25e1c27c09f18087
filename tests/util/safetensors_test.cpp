// safetensors files: round trips of every dtype, the checksum, and every kind of damage failing
// with a message instead of a crash.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/paths.h"
#include "util/atomic_file.h"
#include "util/check.h"
#include "util/safetensors.h"

namespace cg::safetensors {
namespace {

TensorRecord record(std::string dtype, std::vector<int64_t> shape, size_t item) {
  TensorRecord r{std::move(dtype), std::move(shape), {}};
  size_t n = item;
  for (int64_t d : r.shape) n *= size_t(d);
  for (size_t i = 0; i < n; ++i) r.bytes.push_back(uint8_t(i * 37 + 11));
  return r;
}

File sample() {
  File f;
  f.tensors = {{"w", record("F32", {2, 3}, 4)},     {"d", record("F64", {4}, 8)},
               {"h", record("F16", {3}, 2)},        {"b", record("BF16", {1, 2}, 2)},
               {"n", record("I64", {}, 8)},         {"i", record("I32", {2}, 4)},
               {"u", record("U8", {5}, 1)},         {"empty", record("F32", {0, 4}, 4)}};
  f.metadata = {{"epoch", "3"}, {"note", "hello \"world\""}};
  return f;
}

std::string error_of(const std::string& path) {
  try {
    load(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, RoundTripEveryDtypeAndMetadata) {
  const auto dir = test::make_temp_dir("st");
  const std::string path = (dir / "a.safetensors").string();
  save(path, sample());
  const File g = load(path);
  const File f = sample();
  ASSERT_EQ(g.tensors.size(), f.tensors.size());
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    EXPECT_EQ(g.tensors[i].first, f.tensors[i].first);  // file order kept
    EXPECT_EQ(g.tensors[i].second.dtype, f.tensors[i].second.dtype);
    EXPECT_EQ(g.tensors[i].second.shape, f.tensors[i].second.shape);
    EXPECT_EQ(g.tensors[i].second.bytes, f.tensors[i].second.bytes);
  }
  EXPECT_EQ(g.metadata.at("epoch"), "3");
  EXPECT_EQ(g.metadata.at("note"), "hello \"world\"");
  EXPECT_TRUE(g.metadata.count("cudagrad.checksum"));
  // The header length is a multiple of 8, as the format recommends.
  std::ifstream in(path, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
}

TEST(Safetensors, TruncationAnywhereFailsWithAMessage) {
  const auto dir = test::make_temp_dir("st_trunc");
  const std::string path = (dir / "a.safetensors").string();
  save(path, sample());
  const auto size = std::filesystem::file_size(path);
  for (uintmax_t keep : {uintmax_t(0), uintmax_t(5), uintmax_t(20), size / 2, size - 1}) {
    save(path, sample());
    std::filesystem::resize_file(path, keep);
    const std::string err = error_of(path);
    EXPECT_NE(err.find(path), std::string::npos) << "cut at " << keep << ": '" << err << "'";
  }
}

TEST(Safetensors, FlippedDataByteFailsTheChecksum) {
  const auto dir = test::make_temp_dir("st_flip");
  const std::string path = (dir / "a.safetensors").string();
  save(path, sample());
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(-3, std::ios::end);
  f.put('\x7f');
  f.close();
  EXPECT_NE(error_of(path).find("checksum"), std::string::npos) << error_of(path);
}

TEST(Safetensors, ForeignFilesWithoutChecksumLoad) {
  const auto dir = test::make_temp_dir("st_foreign");
  const std::string path = (dir / "a.safetensors").string();
  const std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string raw(8, '\0');
  raw[0] = char(header.size());
  raw += header + std::string(8, '\x01');
  write_file_atomically(path, raw);
  const File f = load(path);
  ASSERT_NE(f.find("x"), nullptr);
  EXPECT_EQ(f.find("x")->bytes.size(), 8u);
}

TEST(Safetensors, MalformedHeadersFail) {
  const auto dir = test::make_temp_dir("st_bad");
  const std::string path = (dir / "a.safetensors").string();
  auto write = [&](const std::string& header, size_t data_bytes) {
    std::string raw(8, '\0');
    raw[0] = char(header.size());
    write_file_atomically(path, raw + header + std::string(data_bytes, '\0'));
  };
  write("{not json", 0);
  EXPECT_NE(error_of(path).find("JSON"), std::string::npos) << error_of(path);
  write(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,8]}})", 8);
  EXPECT_NE(error_of(path).find("need"), std::string::npos) << error_of(path);
  write(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,800]}})", 8);
  EXPECT_NE(error_of(path).find("outside"), std::string::npos) << error_of(path);
  write(R"({"x":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", 8);
  EXPECT_NE(error_of(path).find("Q7"), std::string::npos) << error_of(path);
  write(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12);
  EXPECT_NE(error_of(path).find("overlap"), std::string::npos) << error_of(path);
  EXPECT_NE(error_of((dir / "missing.safetensors").string()).find("missing.safetensors"), std::string::npos);
}

TEST(AtomicFile, ReplacesWholeAndLeavesNoTemporary) {
  const auto dir = test::make_temp_dir("atomic");
  const std::string path = (dir / "sub" / "f.txt").string();
  write_file_atomically(path, "first version, longer");
  write_file_atomically(path, "second");
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "second");
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir / "sub")) entries += bool(e.path().filename() != "");
  EXPECT_EQ(entries, 1);
}

TEST(AtomicFile, UnwritableLocationNamesThePath) {
  const auto dir = test::make_temp_dir("atomic_bad");
  const std::string blocker = (dir / "file").string();
  write_file_atomically(blocker, "x");
  const std::string path = blocker + "/inside.txt";  // parent is a file: cannot create
  try {
    write_file_atomically(path, "y");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cg::safetensors
