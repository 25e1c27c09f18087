// Reading a dataset file that may or may not be gzipped, through zlib's gz* API (which passes a
// plain file through unchanged). Rule: every failure is a cg::Error naming the file and what went
// wrong (missing, a broken gzip stream, fewer bytes than promised); nothing here crashes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

struct gzFile_s;  // zlib's file handle; <zlib.h> stays out of this header

namespace cg::data {

// `dir/name` if that file exists, else `dir/name.gz`; otherwise a cg::Error naming the path and
// ending with `hint` (how to get the dataset).
std::string find_data_file(const std::string& dir, const std::string& name, const std::string& hint = "");

// One file opened for sequential reading. `expected_total` in the methods below is the number of
// bytes the caller believes the whole (decompressed) file holds, or -1 when it cannot know; it
// only feeds error messages.
class DataFile {
 public:
  explicit DataFile(std::string path);  // cg::Error if the file is missing or cannot be opened
  ~DataFile();
  DataFile(const DataFile&) = delete;
  DataFile& operator=(const DataFile&) = delete;

  const std::string& path() const { return path_; }
  int64_t bytes_read() const { return bytes_read_; }

  // Appends exactly `count` more bytes to `out`, or throws "<path> is truncated or corrupt:
  // expected <expected_total> bytes, found <n> (<why>)". Memory grows with the bytes that actually
  // arrive, so a header promising absurd sizes fails as truncated instead of allocating them.
  void read_exact(std::vector<uint8_t>& out, int64_t count, int64_t expected_total);
  // Appends up to `count` more bytes to `out` and returns how many came: fewer only when the data
  // ends. A broken gzip stream throws, as in read_exact.
  int64_t read_up_to(std::vector<uint8_t>& out, int64_t count, int64_t expected_total);
  // Throws the "truncated or corrupt: expected .. found .." error for the bytes read so far.
  [[noreturn]] void fail_short(int64_t expected_total) const;
  // Checks that the data ends here and the gzip stream closed cleanly: extra bytes or a stream
  // whose trailer is missing or broken are errors, in the same words as read_exact.
  void expect_end(int64_t expected_total);

 private:
  enum class State { reading, ended, broken };
  // Reads up to `count` bytes into dst; fewer means the data ended or the stream broke (state_).
  int64_t read_some(uint8_t* dst, int64_t count);

  std::string path_;
  gzFile_s* file_ = nullptr;
  int64_t bytes_read_ = 0;
  State state_ = State::reading;
  std::string zlib_message_;  // why the stream broke
};

}  // namespace cg::data
