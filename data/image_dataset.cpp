#include "data/image_dataset.h"

#include "util/check.h"

namespace cg::data {

ImageDataset::ImageDataset(std::string name, ImageSet images, int num_classes,
                           std::vector<float> mean, std::vector<float> std, int image_size)
    : name_(std::move(name)), set_(std::move(images)), num_classes_(num_classes),
      mean_(std::move(mean)), std_(std::move(std)) {
  CG_CHECK(int(mean_.size()) == set_.channels && int(std_.size()) == set_.channels,
           "{}: normalization for {} channels", name_, set_.channels);
  out_size_h_ = set_.height;
  out_size_w_ = set_.width;
  if (image_size > 0) {
    if (image_size < set_.height || image_size < set_.width)
      throw Error(fmt::format("data.image_size={} is smaller than {}'s native {}x{} images (cropping "
                              "is not supported; use 0 for the native size)",
                              image_size, name_, set_.height, set_.width));
    out_size_h_ = out_size_w_ = image_size;
  }
  for (uint8_t l : set_.labels)
    if (l >= num_classes_)
      throw Error(fmt::format("{}: label {} outside [0, {})", name_, int(l), num_classes_));
}

void ImageDataset::get(int64_t index, float* image, int64_t* label) const {
  CG_CHECK(index >= 0 && index < set_.count, "{}: index {} outside [0, {})", name_, index, set_.count);
  const int h = set_.height, w = set_.width;
  const int top = (out_size_h_ - h) / 2, left = (out_size_w_ - w) / 2;
  const uint8_t* src = set_.pixels.data() + index * int64_t(set_.channels) * h * w;
  for (int c = 0; c < set_.channels; ++c) {
    const float scale = 1.0f / (255.0f * std_[size_t(c)]), shift = -mean_[size_t(c)] / std_[size_t(c)];
    float* plane = image + int64_t(c) * out_size_h_ * out_size_w_;
    if (top > 0 || left > 0 || out_size_h_ != h)
      std::fill(plane, plane + int64_t(out_size_h_) * out_size_w_, shift);  // black border
    for (int y = 0; y < h; ++y) {
      const uint8_t* row = src + (int64_t(c) * h + y) * w;
      float* dst = plane + int64_t(y + top) * out_size_w_ + left;
      for (int x = 0; x < w; ++x) dst[x] = float(row[x]) * scale + shift;
    }
  }
  *label = set_.labels[size_t(index)];
}

}  // namespace cg::data
