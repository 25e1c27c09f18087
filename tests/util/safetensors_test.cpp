// safetensors files: round trips of every dtype, the layout other tools expect, the checksum,
// every kind of damage failing with a message instead of a crash, and PyTorch reading our files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "support/paths.h"
#include "support/need_tool.h"
#include "util/atomic_file.h"
#include "util/check.h"
#include "util/safetensors.h"

namespace cg::safetensors {
namespace {

namespace fs = std::filesystem;

// A record whose bytes are the given values' in-memory (little-endian) representation.
template <typename T>
TensorRecord typed(std::string dtype, std::vector<int64_t> shape, std::vector<T> values) {
  TensorRecord r{std::move(dtype), std::move(shape), std::vector<uint8_t>(values.size() * sizeof(T))};
  if (!values.empty()) std::memcpy(r.bytes.data(), values.data(), r.bytes.size());
  return r;
}

// One tensor of each supported dtype plus a 0-d and an empty one. F16/BF16 values are bit
// patterns: 0x3C00 = 1.0 and 0xC000 = -2.0 in half; 0x3F80 = 1.0 and 0x3F00 = 0.5 in bfloat16.
File sample() {
  File f;
  f.tensors = {{"weight", typed<float>("F32", {2, 3}, {1.5f, -2.f, 3.25f, 0.f, 4.f, -0.5f})},
               {"double", typed<double>("F64", {2}, {0.1, -1e300})},
               {"half", typed<uint16_t>("F16", {2}, {0x3C00, 0xC000})},
               {"bf16", typed<uint16_t>("BF16", {1, 2}, {0x3F80, 0x3F00})},
               {"step", typed<int64_t>("I64", {}, {-123456789012345})},
               {"labels", typed<int32_t>("I32", {3}, {7, -1, 2147483647})},
               {"bytes", typed<uint8_t>("U8", {4}, {0, 1, 128, 255})},
               {"empty", typed<float>("F32", {0, 4}, {})}};
  f.metadata = {{"epoch", "3"}, {"note", "quotes \" and \\ and \xc3\xa9"}};
  return f;
}

std::string load_error(const std::string& path) {
  try {
    load(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded without error)";
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A file with `header` as its JSON text (unpadded) and `data` as its data section.
void write_raw(const std::string& path, const std::string& header, const std::string& data) {
  std::string raw(8, '\0');
  for (int i = 0; i < 8; ++i) raw[size_t(i)] = char((header.size() >> (8 * i)) & 0xff);
  write_file_atomically(path, raw + header + data);
}

void expect_same_tensors(const File& got, const File& want) {
  ASSERT_EQ(got.tensors.size(), want.tensors.size());
  for (size_t i = 0; i < want.tensors.size(); ++i) {
    EXPECT_EQ(got.tensors[i].first, want.tensors[i].first) << "tensor " << i;
    EXPECT_EQ(got.tensors[i].second.dtype, want.tensors[i].second.dtype) << want.tensors[i].first;
    EXPECT_EQ(got.tensors[i].second.shape, want.tensors[i].second.shape) << want.tensors[i].first;
    EXPECT_EQ(got.tensors[i].second.bytes, want.tensors[i].second.bytes) << want.tensors[i].first;
  }
}

TEST(Safetensors, RoundTripEveryDtypeZeroDAndEmptyTensorsAndMetadata) {
  const std::string path = (test::make_temp_dir("st_round") / "a.safetensors").string();
  save(path, sample());
  const File back = load(path);
  expect_same_tensors(back, sample());  // names, order, dtypes, shapes and bytes
  EXPECT_EQ(back.metadata.at("epoch"), "3");
  EXPECT_EQ(back.metadata.at("note"), sample().metadata.at("note"));
  EXPECT_EQ(back.metadata.at("cudagrad.format"), "1");
  EXPECT_EQ(back.metadata.at("cudagrad.checksum").size(), 8u);
  EXPECT_EQ(back.metadata.size(), 4u);
  ASSERT_NE(back.find("step"), nullptr);
  EXPECT_TRUE(back.find("step")->shape.empty());
  EXPECT_EQ(back.find("step")->bytes.size(), 8u);
  EXPECT_EQ(back.find("nope"), nullptr);
}

TEST(Safetensors, NoTensorsAtAllRoundTrips) {
  const std::string path = (test::make_temp_dir("st_none") / "a.safetensors").string();
  save(path, File{{}, {{"k", "v"}}});
  const File back = load(path);
  EXPECT_TRUE(back.tensors.empty());
  EXPECT_EQ(back.metadata.at("k"), "v");
}

TEST(Safetensors, LayoutIsWhatOtherReadersExpect) {
  const std::string path = (test::make_temp_dir("st_layout") / "a.safetensors").string();
  save(path, sample());
  const std::string raw = read_bytes(path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(raw[size_t(i)])) << (8 * i);
  EXPECT_EQ(n % 8, 0u) << "header not padded to a multiple of 8";
  size_t data_bytes = 0;
  for (const auto& [name, r] : sample().tensors) data_bytes += r.bytes.size();
  EXPECT_EQ(raw.size(), 8 + n + data_bytes) << "data must follow the header packed, without gaps";
  const std::string header = raw.substr(8, n);
  EXPECT_EQ(header.front(), '{');
  EXPECT_EQ(header.find_last_not_of(' '), header.rfind('}')) << "padding must be spaces";
  // The first tensor's bytes start the data section.
  EXPECT_EQ(raw.compare(8 + n, 24, reinterpret_cast<const char*>(sample().tensors[0].second.bytes.data()), 24), 0);
}

TEST(Safetensors, ZeroByteTensorsKeepTheirWriteOrder) {
  const std::string path = (test::make_temp_dir("st_order") / "a.safetensors").string();
  File f;
  f.tensors = {{"z", typed<float>("F32", {0}, {})}, {"b", typed<float>("F32", {1}, {1.f})},
               {"y", typed<uint8_t>("U8", {0, 3}, {})}, {"x", typed<double>("F64", {0}, {})},
               {"a", typed<int32_t>("I32", {1}, {5})}};
  save(path, f);
  expect_same_tensors(load(path), f);
}

TEST(Safetensors, TruncationAnywhereFailsNamingTheFile) {
  const std::string path = (test::make_temp_dir("st_trunc") / "a.safetensors").string();
  save(path, sample());
  const uintmax_t size = fs::file_size(path);
  for (uintmax_t keep : {uintmax_t(0), uintmax_t(3), uintmax_t(7), uintmax_t(8), uintmax_t(20), size / 2,
                         size - 20, size - 1}) {
    save(path, sample());
    fs::resize_file(path, keep);
    const std::string err = load_error(path);
    EXPECT_NE(err.find(path), std::string::npos) << "cut at " << keep << ": " << err;
    EXPECT_EQ(err.find("checksum"), std::string::npos) << "cut at " << keep << " should fail on sizes: " << err;
  }
}

TEST(Safetensors, FlippedDataByteFailsTheChecksum) {
  const std::string path = (test::make_temp_dir("st_flip") / "a.safetensors").string();
  save(path, sample());
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  const std::string err = load_error(path);
  EXPECT_NE(err.find("checkpoint " + path + " is corrupt: checksum mismatch"), std::string::npos) << err;
}

TEST(Safetensors, ChangedMetadataFailsTheChecksum) {
  const std::string path = (test::make_temp_dir("st_meta") / "a.safetensors").string();
  save(path, sample());
  std::string raw = read_bytes(path);
  const size_t at = raw.find("\"epoch\":\"3\"");
  ASSERT_NE(at, std::string::npos);
  raw[at + 9] = '4';  // still valid JSON, same length: only the checksum can tell
  write_file_atomically(path, raw);
  EXPECT_NE(load_error(path).find("checksum mismatch"), std::string::npos) << load_error(path);
}

TEST(Safetensors, EverySingleByteFlipIsDetected) {
  const std::string path = (test::make_temp_dir("st_every") / "a.safetensors").string();
  save(path, sample());
  const std::string good = read_bytes(path);
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = char(bad[i] ^ 0x5a);
    write_file_atomically(path, bad);
    EXPECT_NE(load_error(path).find(path), std::string::npos) << "flip at byte " << i << " of " << good.size();
  }
}

TEST(Safetensors, ForeignFilesWithoutChecksumLoadInDataOrder) {
  const std::string path = (test::make_temp_dir("st_foreign") / "a.safetensors").string();
  // As another tool might write it: unpadded, keys not in data order, metadata first.
  write_raw(path,
            R"({"__metadata__":{"format":"pt"},)"
            R"("second":{"dtype":"U8","shape":[2],"data_offsets":[8,10]},)"
            R"("first":{"shape":[2],"data_offsets":[0,8],"dtype":"F32"}})",
            std::string(8, '\x01') + "\x07\x09");
  const File f = load(path);
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].first, "first");
  EXPECT_EQ(f.tensors[1].first, "second");
  EXPECT_EQ(f.tensors[1].second.bytes, (std::vector<uint8_t>{7, 9}));
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
}

TEST(Safetensors, DeclaredCudagradFormatWithoutChecksumFails) {
  const std::string path = (test::make_temp_dir("st_nosum") / "a.safetensors").string();
  write_raw(path, R"({"__metadata__":{"cudagrad.format":"1"},"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
            "\x05");
  EXPECT_NE(load_error(path).find("has no cudagrad.checksum"), std::string::npos) << load_error(path);
}

TEST(Safetensors, ResavingALoadedFileReplacesTheOldChecksum) {
  const auto dir = test::make_temp_dir("st_resave");
  save((dir / "a.safetensors").string(), sample());
  File f = load((dir / "a.safetensors").string());
  f.metadata["epoch"] = "4";
  save((dir / "b.safetensors").string(), f);
  EXPECT_EQ(load((dir / "b.safetensors").string()).metadata.at("epoch"), "4");
}

struct BadHeader {
  const char* header;
  size_t data_bytes;
  const char* expected;  // a piece of the error message
};

TEST(Safetensors, MalformedHeadersFailWithTheCause) {
  const std::string path = (test::make_temp_dir("st_bad") / "a.safetensors").string();
  const BadHeader cases[] = {
      {"{not json", 0, "not valid JSON"},
      {"[1, 2]", 0, "not a JSON object"},
      {R"({"x": 5})", 0, "'x': entry is not a JSON object"},
      {R"({"x":{"shape":[2],"data_offsets":[0,8]}})", 8, "no \"dtype\""},
      {R"({"x":{"dtype":"Q7","shape":[2],"data_offsets":[0,8]}})", 8, "unsupported dtype 'Q7'"},
      {R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8, "not a count"},
      {R"({"x":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", 8, "not a count"},
      {R"({"x":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", 8, "shape is not an array"},
      {R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8, "not a [begin, end] pair"},
      {R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8, "run backwards"},
      {R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,8]}})", 8, "need 16"},
      {R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,800]}})", 8, "outside the 8-byte data section"},
      {R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551615]}})", 8, "not a count"},
      {R"({"x":{"dtype":"U8","shape":[4294967296,4294967296,4],"data_offsets":[0,8]}})", 8, "more than 2^64"},
      {R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       12, "'x' and 'y' overlap"},
      {R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, "4 unused bytes before tensor 'x'"},
      {R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8, "4 bytes after the last tensor"},
      {R"({"__metadata__":[1]})", 0, "__metadata__ is not a JSON object"},
      {R"({"__metadata__":{"epoch":3}})", 0, "metadata 'epoch' is not a string"},
  };
  for (const BadHeader& c : cases) {
    write_raw(path, c.header, std::string(c.data_bytes, '\0'));
    const std::string err = load_error(path);
    EXPECT_NE(err.find(path), std::string::npos) << c.header << " -> " << err;
    EXPECT_NE(err.find(c.expected), std::string::npos) << c.header << " -> " << err;
  }
}

TEST(Safetensors, HeaderLengthBeyondTheFileFails) {
  const std::string path = (test::make_temp_dir("st_len") / "a.safetensors").string();
  write_file_atomically(path, std::string("\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10));
  EXPECT_NE(load_error(path).find("exceeds the 2 bytes that follow"), std::string::npos) << load_error(path);
}

TEST(Safetensors, MissingFileNamesThePath) {
  const std::string path = (test::make_temp_dir("st_missing") / "nope.safetensors").string();
  const std::string err = load_error(path);
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_NE(err.find("No such file"), std::string::npos) << err;
}

std::string save_error(const File& f, const std::string& path) {
  try {
    save(path, f);
  } catch (const Error& e) {
    return e.what();
  }
  return "(saved without error)";
}

TEST(Safetensors, SaveRejectsInconsistentRecords) {
  const std::string path = (test::make_temp_dir("st_save_bad") / "a.safetensors").string();
  File f;
  f.tensors = {{"x", typed<float>("F32", {3}, {1.f, 2.f})}};
  EXPECT_NE(save_error(f, path).find("'x' has 8 bytes, but dtype F32 and shape [3] need 12"), std::string::npos)
      << save_error(f, path);
  f.tensors = {{"x", typed<float>("F8", {1}, {1.f})}};
  EXPECT_NE(save_error(f, path).find("unsupported dtype 'F8'"), std::string::npos) << save_error(f, path);
  f.tensors = {{"x", typed<float>("F32", {1}, {1.f})}, {"x", typed<float>("F32", {1}, {1.f})}};
  EXPECT_NE(save_error(f, path).find("duplicate tensor name 'x'"), std::string::npos) << save_error(f, path);
  f.tensors = {{"__metadata__", typed<float>("F32", {1}, {1.f})}};
  EXPECT_NE(save_error(f, path).find("reserved"), std::string::npos) << save_error(f, path);
  f.tensors = {};
  f.metadata = {{"bad", "\xff"}};
  EXPECT_NE(save_error(f, path).find("UTF-8"), std::string::npos) << save_error(f, path);
  EXPECT_FALSE(fs::exists(path)) << "nothing may be written when save fails";
}

// PyTorch (via tests/python/read_safetensors.py, which uses only json, zlib and torch) reads
// every tensor we write, with the right dtype, shape and values, and agrees on the checksum.
TEST(Safetensors, PyTorchReadsWhatWeWrite) {
  NEED_TOOL(test::missing_python_module("torch", "Debian's python3-torch"));
  const auto dir = test::make_temp_dir("st_python");
  const std::string path = (dir / "a.safetensors").string(), out = (dir / "out.txt").string();
  save(path, sample());
  const std::string script = (test::source_dir() / "tests/python/read_safetensors.py").string();
  const int rc = std::system(("/usr/bin/python3 " + script + " --values " + path + " > " + out + " 2>&1").c_str());
  const std::string printed = read_bytes(out);
  ASSERT_EQ(rc, 0) << printed;
  const std::string expected =
      "weight F32 torch.float32 [2, 3] [1.5, -2.0, 3.25, 0.0, 4.0, -0.5]\n"
      "double F64 torch.float64 [2] [0.1, -1e+300]\n"
      "half F16 torch.float16 [2] [1.0, -2.0]\n"
      "bf16 BF16 torch.bfloat16 [1, 2] [1.0, 0.5]\n"
      "step I64 torch.int64 [] [-123456789012345]\n"
      "labels I32 torch.int32 [3] [7, -1, 2147483647]\n"
      "bytes U8 torch.uint8 [4] [0, 1, 128, 255]\n"
      "empty F32 torch.float32 [0, 4] []\n"
      "metadata cudagrad.checksum=" + load(path).metadata.at("cudagrad.checksum") + "\n"
      "metadata cudagrad.format=1\n"
      "metadata epoch=3\n"
      "metadata note=quotes \" and \\ and \xc3\xa9\n"
      "checksum: ok\n";
  EXPECT_EQ(printed, expected);

  // The script's independent checksum also notices damage.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  EXPECT_NE(std::system(("/usr/bin/python3 " + script + " " + path + " > " + out + " 2>&1").c_str()), 0);
  EXPECT_NE(read_bytes(out).find("checksum: MISMATCH"), std::string::npos) << read_bytes(out);
}


// The reference implementation (the `safetensors` Python package, tests/python/
// reference_safetensors.py) reads what we write, and we read what it writes.
std::string reference_script() { return (test::source_dir() / "tests/python/reference_safetensors.py").string(); }

TEST(Safetensors, ReferencePackageReadsWhatWeWrite) {
  NEED_TOOL(test::missing_python_module("safetensors.torch", "scripts/install_deps.sh --for-tests"));
  const auto dir = test::make_temp_dir("st_reference_read");
  const std::string path = (dir / "a.safetensors").string(), out = (dir / "out.txt").string();
  save(path, sample());
  const int rc = std::system(("/usr/bin/python3 " + reference_script() + " read " + path + " > " + out + " 2>&1").c_str());
  const std::string printed = read_bytes(out);
  ASSERT_EQ(rc, 0) << printed;
  const std::string expected =
      "bf16 torch.bfloat16 [1, 2] [1.0, 0.5]\n"
      "bytes torch.uint8 [4] [0, 1, 128, 255]\n"
      "double torch.float64 [2] [0.1, -1e+300]\n"
      "empty torch.float32 [0, 4] []\n"
      "half torch.float16 [2] [1.0, -2.0]\n"
      "labels torch.int32 [3] [7, -1, 2147483647]\n"
      "step torch.int64 [] [-123456789012345]\n"
      "weight torch.float32 [2, 3] [1.5, -2.0, 3.25, 0.0, 4.0, -0.5]\n"
      "metadata cudagrad.checksum=" + load(path).metadata.at("cudagrad.checksum") + "\n"
      "metadata cudagrad.format=1\n"
      "metadata epoch=3\n"
      "metadata note=quotes \" and \\ and \xc3\xa9\n";
  EXPECT_EQ(printed, expected);
}

TEST(Safetensors, WeReadWhatTheReferencePackageWrites) {
  NEED_TOOL(test::missing_python_module("safetensors.torch", "scripts/install_deps.sh --for-tests"));
  const auto dir = test::make_temp_dir("st_reference_write");
  const std::string path = (dir / "b.safetensors").string(), out = (dir / "out.txt").string();
  const int rc = std::system(("/usr/bin/python3 " + reference_script() + " write " + path + " > " + out + " 2>&1").c_str());
  ASSERT_EQ(rc, 0) << read_bytes(out);
  const File f = load(path);  // no cudagrad checksum: accepted as another tool's file
  EXPECT_EQ(f.metadata.at("written_by"), "safetensors");
  EXPECT_EQ(f.metadata.count(kChecksumKey), 0u);
  auto expect_record = [&](const std::string& name, const TensorRecord& want) {
    const TensorRecord* got = f.find(name);
    ASSERT_NE(got, nullptr) << name;
    EXPECT_EQ(got->dtype, want.dtype) << name;
    EXPECT_EQ(got->shape, want.shape) << name;
    EXPECT_EQ(got->bytes, want.bytes) << name;
  };
  expect_record("a.f32", typed<float>("F32", {2, 2}, {1.5f, -2.f, 0.25f, 8.f}));
  expect_record("b.f64", typed<double>("F64", {2}, {0.1, -3.0}));
  expect_record("c.f16", typed<uint16_t>("F16", {3}, {0x3C00, 0xC000, 0x3800}));
  expect_record("d.bf16", typed<uint16_t>("BF16", {2}, {0x3F80, 0x3F00}));
  expect_record("e.i64", typed<int64_t>("I64", {}, {-123456789012345}));
  expect_record("f.i32", typed<int32_t>("I32", {2}, {7, -1}));
  expect_record("g.u8", typed<uint8_t>("U8", {2}, {0, 255}));
  EXPECT_EQ(f.tensors.size(), 7u);
}

}  // namespace
}  // namespace cg::safetensors
