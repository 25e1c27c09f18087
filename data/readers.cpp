#include "data/readers.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/check.h"

namespace cg::data {
namespace fs = std::filesystem;

std::vector<uint8_t> read_maybe_gzipped(const std::string& path) {
  if (!fs::exists(path)) throw Error(fmt::format("data file {} does not exist", path));
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw Error(fmt::format("cannot open data file {}: {}", path, std::strerror(errno)));
  gzbuffer(f, 1 << 20);
  std::vector<uint8_t> out;
  std::vector<uint8_t> buf(1 << 20);
  while (true) {
    const int n = gzread(f, buf.data(), unsigned(buf.size()));
    if (n < 0) {
      int err = 0;
      const std::string msg = gzerror(f, &err);
      gzclose(f);
      throw Error(fmt::format("data file {} is corrupt: {}", path, msg));
    }
    if (n == 0) break;
    out.insert(out.end(), buf.begin(), buf.begin() + n);
  }
  int err = 0;
  const char* msg = gzerror(f, &err);
  if (err != Z_OK && err != Z_BUF_ERROR) {
    const std::string m = msg;
    gzclose(f);
    throw Error(fmt::format("data file {} is corrupt: {}", path, m));
  }
  // A gzip stream cut short reads as a clean end in some zlib versions; gzclose_r reports it.
  if (gzclose(f) != Z_OK) throw Error(fmt::format("data file {} is truncated or corrupt (gzip stream ends early)", path));
  return out;
}

namespace {

uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

// The first of `names` that exists in dir, with or without ".gz".
std::string find_file(const std::string& dir, const std::vector<std::string>& names) {
  for (const auto& n : names)
    for (const char* ext : {".gz", ""}) {
      const fs::path p = fs::path(dir) / (n + ext);
      if (fs::exists(p)) return p.string();
    }
  throw Error(fmt::format("data file {}/{}[.gz] not found (is the dataset installed? Fashion-MNIST: "
                          "apt-get install dataset-fashion-mnist, or set data.path)",
                          dir, names.front()));
}

}  // namespace

ImageSet read_idx_split(const std::string& dir, bool train) {
  const std::string prefix = train ? "train" : "t10k";
  const std::string img_path = find_file(dir, {prefix + "-images-idx3-ubyte", prefix + "-images.idx3-ubyte"});
  const std::string lab_path = find_file(dir, {prefix + "-labels-idx1-ubyte", prefix + "-labels.idx1-ubyte"});
  const std::vector<uint8_t> img = read_maybe_gzipped(img_path), lab = read_maybe_gzipped(lab_path);

  if (img.size() < 16 || be32(img.data()) != 0x00000803)
    throw Error(fmt::format("{} is not an IDX image file (bad magic number or shorter than its header)", img_path));
  if (lab.size() < 8 || be32(lab.data()) != 0x00000801)
    throw Error(fmt::format("{} is not an IDX label file (bad magic number or shorter than its header)", lab_path));
  ImageSet s;
  s.count = be32(img.data() + 4);
  s.height = int(be32(img.data() + 8));
  s.width = int(be32(img.data() + 12));
  s.channels = 1;
  const uint64_t need = uint64_t(s.count) * uint64_t(s.height) * uint64_t(s.width);
  if (img.size() - 16 != need)
    throw Error(fmt::format("{} is truncated or corrupt: header promises {} image bytes, found {}", img_path,
                            need, img.size() - 16));
  const uint64_t labels = be32(lab.data() + 4);
  if (lab.size() - 8 != labels)
    throw Error(fmt::format("{} is truncated or corrupt: header promises {} labels, found {}", lab_path, labels,
                            lab.size() - 8));
  if (int64_t(labels) != s.count)
    throw Error(fmt::format("{} has {} images but {} has {} labels", img_path, s.count, lab_path, labels));
  s.pixels.assign(img.begin() + 16, img.end());
  s.labels.assign(lab.begin() + 8, lab.end());
  return s;
}

ImageSet read_cifar10_split(const std::string& dir, bool train) {
  std::string base = dir;
  if (!fs::exists(fs::path(dir) / "test_batch.bin") && fs::exists(fs::path(dir) / "cifar-10-batches-bin"))
    base = (fs::path(dir) / "cifar-10-batches-bin").string();
  std::vector<std::string> files;
  if (train) {
    for (int i = 1; i <= 5; ++i) files.push_back("data_batch_" + std::to_string(i) + ".bin");
  } else {
    files.push_back("test_batch.bin");
  }
  constexpr int64_t kRecord = 1 + 3 * 32 * 32;
  ImageSet s;
  s.channels = 3;
  s.height = s.width = 32;
  for (const auto& name : files) {
    const std::string path = (fs::path(base) / name).string();
    if (!fs::exists(path)) throw Error(fmt::format("CIFAR-10 file {} not found (set data.path)", path));
    const std::vector<uint8_t> raw = read_maybe_gzipped(path);
    if (raw.empty() || raw.size() % kRecord != 0)
      throw Error(fmt::format("{} is truncated or corrupt: {} bytes is not a whole number of {}-byte records", path,
                              raw.size(), kRecord));
    const int64_t n = int64_t(raw.size()) / kRecord;
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* rec = raw.data() + i * kRecord;
      if (rec[0] >= 10) throw Error(fmt::format("{}: record {} has label {} (corrupt file?)", path, i, int(rec[0])));
      s.labels.push_back(rec[0]);
      s.pixels.insert(s.pixels.end(), rec + 1, rec + kRecord);
    }
    s.count += n;
  }
  return s;
}

}  // namespace cg::data
