// Builds a dataset from its name and options; the one place that knows where each dataset lives
// and how it is normalized.
#pragma once
#include <memory>
#include <string>

#include "data/dataset.h"

namespace cg::data {

enum class DatasetKind { fashion_mnist, cifar10, synthetic };

struct DatasetOptions {
  DatasetKind kind = DatasetKind::fashion_mnist;
  std::string path;  // empty: default_data_path(kind)
  bool train = true;
  int image_size = 0;  // 0: native
  int64_t synthetic_size = 50000;
  int synthetic_channels = 3;
  int num_classes = 10;
  uint64_t seed = 0;
};

std::unique_ptr<Dataset> make_dataset(const DatasetOptions& options);
std::string default_data_path(DatasetKind kind);

}  // namespace cg::data
