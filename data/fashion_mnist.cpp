#include "data/fashion_mnist.h"

#include "data/data_file.h"
#include "data/idx_reader.h"
#include "util/check.h"

namespace cg::data {

ImageSet read_fashion_mnist(const std::string& dir, Split split) {
  const std::string prefix = split == Split::train ? "train" : "t10k";
  // Look both files up first: a missing labels file is reported before a long image read.
  const std::string hint = "install Debian's dataset-fashion-mnist package, or set the data path";
  const std::string images_path = find_data_file(dir, prefix + "-images-idx3-ubyte", hint);
  const std::string labels_path = find_data_file(dir, prefix + "-labels-idx1-ubyte", hint);
  IdxArray images = read_idx_ubyte(images_path, 3);
  IdxArray labels = read_idx_ubyte(labels_path, 1);

  const int64_t count = images.dims[0], height = images.dims[1], width = images.dims[2];
  if (count == 0 || height == 0 || width == 0 || height > 4096 || width > 4096)
    throw Error(fmt::format("{}: implausible image array {}x{}x{}", images_path, count, height, width));
  if (labels.dims[0] != count)
    throw Error(fmt::format("{} holds {} images but {} holds {} labels", images_path, count, labels_path,
                            labels.dims[0]));
  for (int64_t i = 0; i < count; ++i)
    if (labels.data[size_t(i)] >= 10)
      throw Error(fmt::format("{}: label {} of image {} is not a Fashion-MNIST class (0..9)", labels_path,
                              int(labels.data[size_t(i)]), i));
  ImageSet set;
  set.count = count;
  set.channels = 1;
  set.height = int(height);
  set.width = int(width);
  set.pixels = std::move(images.data);
  set.labels = std::move(labels.data);
  return set;
}

std::unique_ptr<Dataset> load_fashion_mnist(const std::string& dir, Split split, int image_size) {
  return std::make_unique<ImageDataset>("fashion_mnist", read_fashion_mnist(dir, split), 10,
                                        Normalization{{kFashionMnistMean}, {kFashionMnistStd}}, image_size);
}

}  // namespace cg::data
