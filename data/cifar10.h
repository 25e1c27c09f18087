// CIFAR-10 in its binary form: 32x32 colour images in 10 classes, 50000 for training in
// data_batch_1.bin .. data_batch_5.bin and 10000 for testing in test_batch.bin. Each record is one
// label byte then 3072 pixel bytes (red, green, blue planes, row-major). Rule: a file that is not a
// whole number of records, or holds a label >= 10, is a cg::Error naming the file.
#pragma once
#include <memory>
#include <string>

#include "data/image_dataset.h"

namespace cg::data {

// The training set's per-channel pixel statistics (R, G, B) on the 0..1 scale.
inline constexpr float kCifar10Mean[3] = {0.4914f, 0.4822f, 0.4465f};
inline constexpr float kCifar10Std[3] = {0.2470f, 0.2435f, 0.2616f};
inline constexpr int64_t kCifar10RecordBytes = 1 + 3 * 32 * 32;

// Reads the split from `dir`, or from `dir`/cifar-10-batches-bin (where the archive unpacks) when
// the files are not directly in `dir`. The files may also be gzipped (name.bin.gz).
ImageSet read_cifar10(const std::string& dir, Split split);

// The split as a normalized dataset; image_size as in ImageDataset (0 = native 32).
std::unique_ptr<Dataset> load_cifar10(const std::string& dir, Split split, int image_size);

}  // namespace cg::data
