#include "data/image_dataset.h"

#include <algorithm>

#include "util/check.h"

namespace cg::data {

ImageDataset::ImageDataset(std::string name, ImageSet images, int num_classes, Normalization normalization,
                           int image_size)
    : name_(std::move(name)), set_(std::move(images)), num_classes_(num_classes),
      norm_(std::move(normalization)), out_height_(set_.height), out_width_(set_.width) {
  CG_CHECK(int(norm_.mean.size()) == set_.channels && int(norm_.std.size()) == set_.channels,
           "{}: normalization needs one mean and one std per channel ({})", name_, set_.channels);
  CG_CHECK(int64_t(set_.pixels.size()) == set_.count * set_.channels * set_.height * set_.width &&
               int64_t(set_.labels.size()) == set_.count,
           "{}: pixel or label buffer does not match {} images", name_, set_.count);
  if (image_size > 0) {
    if (image_size < set_.height || image_size < set_.width)
      throw Error(fmt::format("image_size {} is smaller than {}'s native size {}x{} (cropping is not "
                              "supported; use 0 for the native size)",
                              image_size, name_, set_.height, set_.width));
    out_height_ = out_width_ = image_size;
  }
  for (int64_t i = 0; i < set_.count; ++i)
    if (set_.labels[size_t(i)] >= num_classes_)
      throw Error(fmt::format("{}: image {} has label {}, outside [0, {})", name_, i, int(set_.labels[size_t(i)]),
                              num_classes_));
}

float ImageDataset::black_level(int channel) const {
  CG_CHECK(channel >= 0 && channel < set_.channels, "{}: channel {}", name_, channel);
  return -norm_.mean[size_t(channel)] / norm_.std[size_t(channel)];
}

void ImageDataset::get(int64_t index, float* image, int64_t* label) const {
  CG_CHECK(index >= 0 && index < set_.count, "{}: index {} outside [0, {})", name_, index, set_.count);
  const int h = set_.height, w = set_.width;
  const int top = (out_height_ - h) / 2, left = (out_width_ - w) / 2;
  const bool padded = out_height_ != h || out_width_ != w;
  const int64_t out_plane = int64_t(out_height_) * out_width_;
  const uint8_t* src = set_.pixels.data() + index * int64_t(set_.channels) * h * w;
  for (int c = 0; c < set_.channels; ++c) {
    // pixel/255 normalized as (x - mean) / std, folded into one multiply-add.
    const float scale = 1.0f / (255.0f * norm_.std[size_t(c)]);
    const float shift = black_level(c);
    float* plane = image + c * out_plane;
    if (padded) std::fill(plane, plane + out_plane, shift);
    for (int y = 0; y < h; ++y) {
      const uint8_t* row = src + (int64_t(c) * h + y) * w;
      float* dst = plane + int64_t(y + top) * out_width_ + left;
      for (int x = 0; x < w; ++x) dst[x] = float(row[x]) * scale + shift;
    }
  }
  *label = set_.labels[size_t(index)];
}

}  // namespace cg::data
