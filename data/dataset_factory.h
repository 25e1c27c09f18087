// Builds a dataset from its kind and options: the one place that knows where each dataset lives
// by default and which loader reads it.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "data/dataset.h"
#include "util/enum_names.h"

namespace cg::data {

enum class DatasetKind { fashion_mnist, cifar10, synthetic };
inline EnumNames<DatasetKind> enum_names(DatasetKind) {
  return {{DatasetKind::fashion_mnist, "fashion_mnist"}, {DatasetKind::cifar10, "cifar10"},
          {DatasetKind::synthetic, "synthetic"}};
}

struct DatasetOptions {
  DatasetKind kind = DatasetKind::fashion_mnist;
  std::string path;  // empty: default_data_path(kind)
  bool train = true;
  int image_size = 0;  // 0: native (synthetic: 32); larger pads real images, smaller is an error
  int64_t synthetic_size = 50000;
  int synthetic_channels = 3;
  int num_classes = 10;  // synthetic only: the real datasets have 10
  uint64_t seed = 0;     // synthetic only
};

// Reads or builds the dataset. Throws cg::Error for missing or damaged files (naming them) and for
// an image size smaller than the native one.
std::unique_ptr<Dataset> make_dataset(const DatasetOptions& options);
// Where each dataset is looked for when no path is given: Fashion-MNIST where Debian's
// dataset-fashion-mnist package installs it, CIFAR-10 beside it; "" for synthetic.
std::string default_data_path(DatasetKind kind);
// The images' channel count: 1 for Fashion-MNIST, 3 for CIFAR-10 and (by default) synthetic.
int native_channels(DatasetKind kind);

}  // namespace cg::data
