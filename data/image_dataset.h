// Images held in memory as uint8 CHW with their labels (Fashion-MNIST, CIFAR-10), normalized per
// channel on the way out, and centered in a larger canvas when a bigger image size is asked for
// (Fashion-MNIST 28x28 -> 32x32); the border is the value a black pixel normalizes to.
#pragma once
#include <vector>

#include "data/dataset.h"

namespace cg::data {

struct ImageSet {
  int64_t count = 0;
  int channels = 1, height = 0, width = 0;
  std::vector<uint8_t> pixels;  // count * channels * height * width
  std::vector<uint8_t> labels;  // count
};

class ImageDataset : public Dataset {
 public:
  // mean/std per channel on the 0..1 scale. image_size 0 keeps the native size; a larger one pads;
  // a smaller one is an error naming both sizes.
  ImageDataset(std::string name, ImageSet images, int num_classes, std::vector<float> mean,
               std::vector<float> std, int image_size);
  int64_t size() const override { return set_.count; }
  int channels() const override { return set_.channels; }
  int height() const override { return out_size_h_; }
  int width() const override { return out_size_w_; }
  int num_classes() const override { return num_classes_; }
  std::string name() const override { return name_; }
  void get(int64_t index, float* image, int64_t* label) const override;

 private:
  std::string name_;
  ImageSet set_;
  int num_classes_;
  std::vector<float> mean_, std_;
  int out_size_h_, out_size_w_;
};

}  // namespace cg::data
