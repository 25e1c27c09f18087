#include "util/file_bytes.h"

#include <zlib.h>

#include <fstream>
#include <sstream>

namespace cg {

std::optional<std::string> read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return std::move(bytes).str();
}

uint32_t crc32_of(std::string_view bytes) {
  return uint32_t(crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

}  // namespace cg
