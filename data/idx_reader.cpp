#include "data/idx_reader.h"

#include "data/data_file.h"
#include "util/check.h"

namespace cg::data {
namespace {

uint32_t big_endian_u32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

constexpr uint8_t kUnsignedByte = 0x08;
// Anything bigger is not a dataset file we can hold in memory; refusing it early keeps the
// product of the dimensions from overflowing.
constexpr int64_t kMaxElements = int64_t(1) << 40;

}  // namespace

IdxArray read_idx_ubyte(const std::string& path, int rank) {
  DataFile file(path);
  std::vector<uint8_t> header;
  const int64_t header_bytes = 4 + 4 * int64_t(rank);
  // The real size is unknown until the header is read; until then the header is all we expect.
  file.read_exact(header, 4, header_bytes);
  if (header[0] != 0 || header[1] != 0)
    throw Error(fmt::format("{} is not an IDX file: bad magic number 0x{:02x}{:02x}{:02x}{:02x}", path, header[0],
                            header[1], header[2], header[3]));
  if (header[2] != kUnsignedByte)
    throw Error(fmt::format("{}: IDX element type 0x{:02x}, expected 0x08 (unsigned byte)", path, header[2]));
  if (header[3] != rank)
    throw Error(fmt::format("{}: IDX array has {} dimensions, expected {}", path, int(header[3]), rank));
  file.read_exact(header, 4 * int64_t(rank), header_bytes);

  IdxArray array;
  int64_t elements = 1;
  for (int d = 0; d < rank; ++d) {
    const int64_t size = big_endian_u32(header.data() + 4 + 4 * d);
    array.dims.push_back(size);
    if (size != 0 && elements > kMaxElements / size)  // checked before multiplying: no overflow
      throw Error(fmt::format("{}: IDX header promises more than 2^40 bytes (corrupt header?)", path));
    elements *= size;
  }
  const int64_t total = header_bytes + elements;
  file.read_exact(array.data, elements, total);
  file.expect_end(total);
  return array;
}

}  // namespace cg::data
