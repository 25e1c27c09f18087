// The safetensors file format (Hugging Face; what PyTorch users load with
// safetensors.torch.load_file): an 8-byte little-endian header length N, N bytes of JSON
//   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
//    "__metadata__": {"key": "value", ...}}
// padded with spaces to a multiple of 8, then the tensors' raw little-endian bytes, packed in
// order without gaps (offsets count from the start of the data section).
//
// cudagrad adds integrity inside the format, in "__metadata__": "cudagrad.format" = "1" and
// "cudagrad.checksum" = the CRC-32 (zlib, 8 hex digits) of the header rendered without the
// checksum entry followed by the data section. load() verifies it, so a flipped bit or a
// truncated copy fails loudly instead of training on garbage; files from other tools carry no
// checksum and load normally (but a file that declares "cudagrad.format" must have one, so damage
// to the checksum's key cannot switch verification off). Why CRC-32 rather than a 64-bit hash: the threat is accidental
// damage (bit rot, a cut-off copy), not forgery; CRC-32 provably catches every burst of up to
// 32 flipped bits and misses random damage with probability 2^-32, and zlib (already a
// dependency) computes it at memory speed. The checksum covers the header as cudagrad renders it
// from the parsed content, so re-indenting or re-ordering the JSON does not invalidate it.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace cg::safetensors {

// The dtypes cudagrad reads and writes, by their safetensors names.
inline constexpr const char* kSupportedDtypes = "F64, F32, F16, BF16, I64, I32, U8";
inline constexpr const char* kChecksumKey = "cudagrad.checksum";
inline constexpr const char* kFormatKey = "cudagrad.format";

struct TensorRecord {
  std::string dtype;           // a safetensors name, one of kSupportedDtypes
  std::vector<int64_t> shape;  // [] for a 0-d tensor (one element)
  std::vector<uint8_t> bytes;  // product(shape) * itemsize bytes, little-endian
};

struct File {
  std::vector<std::pair<std::string, TensorRecord>> tensors;  // in data order (= write order)
  std::map<std::string, std::string> metadata;                // string keys and values only
  // The tensor called `name`, or nullptr.
  const TensorRecord* find(const std::string& name) const;
};

// Writes atomically (util/atomic_file.h), adding kFormatKey and kChecksumKey to the metadata (a
// stale checksum in file.metadata is replaced). Throws cg::Error naming the path on I/O errors,
// a duplicate or reserved ("__metadata__") name, an unsupported dtype, a record whose byte count
// does not match its dtype and shape, or a name or metadata string that is not valid UTF-8.
void save(const std::string& path, const File& file);

// Reads and validates everything: the sizes, the JSON, each entry's dtype, shape and offsets
// (inside the data section, tiling it without gaps or overlaps, holding exactly
// product(shape) * itemsize bytes) and the checksum when present. Any problem throws cg::Error
// naming the file and the cause; a checksum mismatch says "checkpoint <path> is corrupt:
// checksum mismatch". Malformed input never crashes. The returned metadata includes the
// cudagrad.* keys as stored.
File load(const std::string& path);

}  // namespace cg::safetensors
