// The CIFAR-10 binary reader (3073-byte records, plain or gzipped): any input is either read or
// rejected with cg::Error. The input is the test split's only file, test_batch.bin.
#include "data/cifar10.h"
#include "fuzz/fuzz_file.h"
#include "util/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cg::fuzz::write_input("test_batch.bin", data, size);
  try {
    cg::data::ImageSet set = cg::data::read_cifar10(cg::fuzz::scratch_dir().string(), cg::data::Split::test);
    if (set.count <= 0 || int64_t(set.labels.size()) != set.count ||
        int64_t(set.pixels.size()) != set.count * (cg::data::kCifar10RecordBytes - 1))
      __builtin_trap();  // accepted but inconsistent
    for (uint8_t label : set.labels)
      if (label >= 10) __builtin_trap();
  } catch (const cg::Error&) {
  }
  return 0;
}
