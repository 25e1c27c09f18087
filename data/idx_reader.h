// IDX, the array format of the MNIST family: a 4-byte magic number (0, 0, element type, number of
// dimensions), one big-endian uint32 per dimension, then the elements in row-major order. Only the
// unsigned-byte type (0x08) is read: it is what image and label files use. Rule: the header is
// checked against the data, and any disagreement is a cg::Error naming the file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cg::data {

struct IdxArray {
  std::vector<int64_t> dims;  // e.g. {60000, 28, 28} for images, {60000} for labels
  std::vector<uint8_t> data;  // product(dims) bytes
};

// Reads the unsigned-byte IDX array at `path` (gzipped or plain), which must have `rank`
// dimensions. Throws cg::Error naming the path for: a missing file, a bad magic number, a wrong
// element type or rank, fewer bytes than the header promises (with expected and found counts),
// bytes beyond what it promises, or a broken gzip stream.
IdxArray read_idx_ubyte(const std::string& path, int rank);

}  // namespace cg::data
