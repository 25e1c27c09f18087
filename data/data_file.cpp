#include "data/data_file.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/check.h"

namespace cg::data {
namespace fs = std::filesystem;

std::string find_data_file(const std::string& dir, const std::string& name, const std::string& hint) {
  const fs::path plain = fs::path(dir) / name;
  if (fs::is_regular_file(plain)) return plain.string();
  const fs::path gz = fs::path(dir) / (name + ".gz");
  if (fs::is_regular_file(gz)) return gz.string();
  throw Error(fmt::format("data file {} not found (nor {}.gz){}{}", plain.string(), plain.string(),
                          hint.empty() ? "" : ": ", hint));
}

DataFile::DataFile(std::string path) : path_(std::move(path)) {
  if (!fs::is_regular_file(path_)) throw Error(fmt::format("data file {} not found", path_));
  file_ = gzopen(path_.c_str(), "rb");
  if (!file_) throw Error(fmt::format("cannot open data file {}: {}", path_, std::strerror(errno)));
  gzbuffer(file_, 1 << 20);
}

DataFile::~DataFile() {
  if (file_) gzclose(file_);
}

int64_t DataFile::read_some(uint8_t* dst, int64_t count) {
  int64_t got = 0;
  while (got < count && state_ == State::reading) {
    // gzread takes an unsigned count: go in chunks well below its limit.
    const unsigned chunk = unsigned(std::min<int64_t>(count - got, int64_t(1) << 30));
    const int n = gzread(file_, dst + got, chunk);
    if (n > 0) got += n;
    if (n == int(chunk)) continue;
    // A short read: the end of the data, or a broken stream. zlib reports a gzip stream cut short
    // as Z_BUF_ERROR ("unexpected end of file") and a damaged one as Z_DATA_ERROR.
    int err = Z_OK;
    const char* message = gzerror(file_, &err);
    if (err != Z_OK) {
      state_ = State::broken;
      zlib_message_ = message ? message : "unknown zlib error";
      // zlib prefixes the message with the path, which our message already names.
      if (zlib_message_.rfind(path_ + ": ", 0) == 0) zlib_message_.erase(0, path_.size() + 2);
    } else if (n <= 0) {
      state_ = State::ended;
    }
  }
  bytes_read_ += got;
  return got;
}

void DataFile::fail_short(int64_t expected_total) const {
  const std::string why = state_ == State::broken ? "broken gzip stream: " + zlib_message_ : "the data ends early";
  const std::string expected = expected_total >= 0 ? fmt::format("{}", expected_total) : "more";
  throw Error(fmt::format("{} is truncated or corrupt: expected {} bytes, found {} ({})", path_, expected,
                          bytes_read_, why));
}

void DataFile::read_exact(std::vector<uint8_t>& out, int64_t count, int64_t expected_total) {
  // Grow as bytes arrive: at most doubling what has come so far (from 1 MiB, up to 64 MiB a
  // step), so a header that promises gigabytes costs about what the file really holds.
  constexpr int64_t kMinStep = int64_t(1) << 20, kMaxStep = int64_t(64) << 20;
  int64_t remaining = count;
  while (remaining > 0) {
    const int64_t step = std::min({remaining, kMaxStep, std::max(kMinStep, int64_t(out.size()))});
    const size_t old = out.size();
    out.resize(old + size_t(step));
    const int64_t got = read_some(out.data() + old, step);
    if (got < step) {
      out.resize(old + size_t(got));
      fail_short(expected_total);
    }
    remaining -= step;
  }
}

int64_t DataFile::read_up_to(std::vector<uint8_t>& out, int64_t count, int64_t expected_total) {
  const size_t old = out.size();
  out.resize(old + size_t(count));
  const int64_t got = read_some(out.data() + old, count);
  out.resize(old + size_t(got));
  if (state_ == State::broken) fail_short(expected_total);
  return got;
}

void DataFile::expect_end(int64_t expected_total) {
  uint8_t probe = 0;
  if (read_some(&probe, 1) == 1)
    throw Error(fmt::format("{} is corrupt: expected {} bytes, found more (the header and the data disagree)",
                            path_, expected_total));
  // No byte came: a clean end is what we want; a broken stream here lost its trailer (or the CRC
  // disagrees) after the last byte we needed.
  if (state_ == State::broken) fail_short(expected_total);
}

}  // namespace cg::data
