// The safetensors file format (Hugging Face; what PyTorch users load with
// safetensors.torch.load_file): an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and byte range, then the raw little-endian data.
// cudagrad adds integrity on top, inside the format: "__metadata__" carries
// "cudagrad.checksum", a CRC-32 (zlib) of the header-without-checksum and the data, which load()
// verifies, so a flipped bit or a truncated copy fails loudly instead of training on garbage.
// Files from other tools have no checksum and load normally.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace cg::safetensors {

struct TensorRecord {
  std::string dtype;           // "F32", "F64", "F16", "BF16", "I64", "I32", "U8"
  std::vector<int64_t> shape;  // [] for a scalar
  std::vector<uint8_t> bytes;  // product(shape) * itemsize bytes
};

struct File {
  std::vector<std::pair<std::string, TensorRecord>> tensors;  // in file order
  std::map<std::string, std::string> metadata;
  const TensorRecord* find(const std::string& name) const;
};

// Writes atomically (util/atomic_file.h) with a checksum. Throws cg::Error on I/O errors or a
// record whose byte count does not match its dtype and shape.
void save(const std::string& path, const File& file);

// Reads and validates everything (sizes, offsets, JSON, dtypes, checksum when present). Any
// problem throws cg::Error naming the file and the cause; malformed input never crashes.
File load(const std::string& path);

}  // namespace cg::safetensors
