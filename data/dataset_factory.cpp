#include "data/dataset_factory.h"

#include "data/image_dataset.h"
#include "data/readers.h"
#include "data/synthetic.h"

namespace cg::data {

std::string default_data_path(DatasetKind kind) {
  switch (kind) {
    case DatasetKind::fashion_mnist: return "/usr/share/datasets/fashion-mnist";  // dataset-fashion-mnist
    case DatasetKind::cifar10: return "/usr/share/datasets/cifar-10";
    case DatasetKind::synthetic: return "";
  }
  return "";
}

std::unique_ptr<Dataset> make_dataset(const DatasetOptions& o) {
  const std::string path = o.path.empty() ? default_data_path(o.kind) : o.path;
  switch (o.kind) {
    case DatasetKind::fashion_mnist:
      return std::make_unique<ImageDataset>("fashion_mnist", read_idx_split(path, o.train), 10,
                                            std::vector<float>{0.2860f}, std::vector<float>{0.3530f},
                                            o.image_size);
    case DatasetKind::cifar10:
      return std::make_unique<ImageDataset>("cifar10", read_cifar10_split(path, o.train), 10,
                                            std::vector<float>{0.4914f, 0.4822f, 0.4465f},
                                            std::vector<float>{0.2470f, 0.2435f, 0.2616f}, o.image_size);
    case DatasetKind::synthetic:
      return std::make_unique<SyntheticDataset>(o.synthetic_size, o.synthetic_channels,
                                                o.image_size > 0 ? o.image_size : 32, o.num_classes, o.seed,
                                                o.train);
  }
  return nullptr;
}

}  // namespace cg::data
