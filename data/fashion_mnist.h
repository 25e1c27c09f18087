// Fashion-MNIST: 28x28 grayscale images of clothing in 10 classes, 60000 for training and 10000
// for testing, stored as four IDX files (gzipped or plain). Rule: the files are validated against
// each other (magic numbers, sizes, image and label counts, labels < 10) before any is used.
#pragma once
#include <memory>
#include <string>

#include "data/image_dataset.h"

namespace cg::data {

// The training set's pixel statistics on the 0..1 scale.
inline constexpr float kFashionMnistMean = 0.2860f;
inline constexpr float kFashionMnistStd = 0.3530f;

// Reads the split from `dir`: train-{images-idx3,labels-idx1}-ubyte[.gz] or the t10k- files.
// Throws cg::Error naming the file for a missing, truncated or inconsistent one.
ImageSet read_fashion_mnist(const std::string& dir, Split split);

// The split as a normalized dataset; image_size as in ImageDataset (0 = native 28).
std::unique_ptr<Dataset> load_fashion_mnist(const std::string& dir, Split split, int image_size);

}  // namespace cg::data
