// Images held in memory as uint8 CHW with their labels (Fashion-MNIST, CIFAR-10), normalized per
// channel on the way out. Rule: a requested image size larger than the native one centers the
// image on a canvas of black pixels (Fashion-MNIST 28x28 -> 32x32); a smaller one is an error.
#pragma once
#include <cstdint>
#include <vector>

#include "data/dataset.h"

namespace cg::data {

// Raw images as read from disk.
struct ImageSet {
  int64_t count = 0;
  int channels = 1, height = 0, width = 0;
  std::vector<uint8_t> pixels;  // count * channels * height * width, CHW per image
  std::vector<uint8_t> labels;  // count
};

// Per-channel normalization on the 0..1 pixel scale: (pixel / 255 - mean) / std.
struct Normalization {
  std::vector<float> mean, std;
};

class ImageDataset : public Dataset {
 public:
  // image_size 0 keeps the native size; a larger one pads (centered; an odd margin puts the extra
  // pixel bottom/right); a smaller one throws cg::Error naming both sizes. Labels must be below
  // num_classes and the normalization must have one entry per channel.
  ImageDataset(std::string name, ImageSet images, int num_classes, Normalization normalization,
               int image_size);
  int64_t size() const override { return set_.count; }
  int channels() const override { return set_.channels; }
  int height() const override { return out_height_; }
  int width() const override { return out_width_; }
  int num_classes() const override { return num_classes_; }
  std::string name() const override { return name_; }
  void get(int64_t index, float* image, int64_t* label) const override;
  float black_level(int channel) const override;

 private:
  std::string name_;
  ImageSet set_;
  int num_classes_;
  Normalization norm_;
  int out_height_, out_width_;
};

}  // namespace cg::data
