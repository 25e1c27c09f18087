#include "data/dataset_factory.h"

#include "data/cifar10.h"
#include "data/fashion_mnist.h"
#include "data/synthetic.h"
#include "util/check.h"

namespace cg::data {

std::string default_data_path(DatasetKind kind) {
  switch (kind) {
    case DatasetKind::fashion_mnist: return "/usr/share/datasets/fashion-mnist";
    case DatasetKind::cifar10: return "/usr/share/datasets/cifar-10";
    case DatasetKind::synthetic: return "";
  }
  return "";
}

int native_channels(DatasetKind kind) { return kind == DatasetKind::fashion_mnist ? 1 : 3; }

std::unique_ptr<Dataset> make_dataset(const DatasetOptions& o) {
  CG_CHECK(o.image_size >= 0, "image_size {} must be >= 0 (0: native)", o.image_size);
  const std::string path = o.path.empty() ? default_data_path(o.kind) : o.path;
  const Split split = o.train ? Split::train : Split::test;
  switch (o.kind) {
    case DatasetKind::fashion_mnist: return load_fashion_mnist(path, split, o.image_size);
    case DatasetKind::cifar10: return load_cifar10(path, split, o.image_size);
    case DatasetKind::synthetic: {
      SyntheticOptions s;
      s.size = o.synthetic_size;
      s.channels = o.synthetic_channels;
      s.image_size = o.image_size > 0 ? o.image_size : 32;
      s.num_classes = o.num_classes;
      s.seed = o.seed;
      s.train = o.train;
      return std::make_unique<SyntheticDataset>(s);
    }
  }
  CG_FAIL("unknown dataset kind {}", int(o.kind));
}

}  // namespace cg::data
