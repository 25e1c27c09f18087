// Whole files as bytes, and their CRC-32 (zlib's): how checkpoints are compared across ranks and
// checked against an index (train/resume_point.h, nn/sharded_checkpoint.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cg {

// The file's bytes, or nullopt when it cannot be opened or read.
std::optional<std::string> read_whole_file(const std::string& path);

// CRC-32 of `bytes`, as zlib's crc32 computes it.
uint32_t crc32_of(std::string_view bytes);

}  // namespace cg
