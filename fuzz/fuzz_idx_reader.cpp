// The IDX reader (Fashion-MNIST's format, plain or gzipped): any input is either read or rejected
// with cg::Error; anything else (a crash, a sanitizer report, another exception) is a finding.
// The first input byte picks the expected rank (1 = labels, 3 = images), the rest is the file.
#include "data/idx_reader.h"
#include "fuzz/fuzz_file.h"
#include "util/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int rank = (data[0] & 1) ? 3 : 1;
  const std::string path = cg::fuzz::write_input("input.idx", data + 1, size - 1);
  try {
    cg::data::IdxArray a = cg::data::read_idx_ubyte(path, rank);
    int64_t elements = 1;
    for (int64_t d : a.dims) elements *= d;
    if (int64_t(a.data.size()) != elements) __builtin_trap();  // accepted but inconsistent
  } catch (const cg::Error&) {
  }
  return 0;
}
