#include "data/augment.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "util/check.h"

namespace cg::data {

Augmenter::Augmenter(AugmentOptions options, const Dataset& dataset)
    : options_(options), channels_(dataset.channels()), height_(dataset.height()), width_(dataset.width()) {
  CG_CHECK(options.crop_padding >= 0, "augment: crop padding {} must be >= 0", options.crop_padding);
  for (int c = 0; c < channels_; ++c) black_.push_back(dataset.black_level(c));
}

AugmentDraw Augmenter::draw(const SampleKey& key) const {
  // A stream of its own ("augment") so no other use of the same key can correlate with it.
  return rng::draw_augment(key.seed, key.rank, key.epoch, key.index, options_.crop_padding, options_.horizontal_flip);
}

void Augmenter::apply(float* image, const SampleKey& key) const {
  if (!options_.enabled) return;
  const AugmentDraw d = draw(key);
  const int64_t plane = int64_t(height_) * width_;
  if (d.shift_y != 0 || d.shift_x != 0) {
    // out(y, x) = in(y + dy, x + dx), black outside. Done in place: rows are visited in the order
    // that reads each source row before it is overwritten, and memmove handles a row onto itself.
    const int dy = d.shift_y, dx = d.shift_x;
    const int keep = std::max(0, width_ - std::abs(dx));  // pixels of a row that come from the image
    const int dst_x = std::max(0, -dx), src_x = std::max(0, dx);
    for (int c = 0; c < channels_; ++c) {
      float* p = image + c * plane;
      const float black = black_[size_t(c)];
      for (int step = 0; step < height_; ++step) {
        const int y = dy >= 0 ? step : height_ - 1 - step;
        float* out = p + int64_t(y) * width_;
        const int sy = y + dy;
        if (sy < 0 || sy >= height_ || keep == 0) {
          std::fill(out, out + width_, black);
          continue;
        }
        std::memmove(out + dst_x, p + int64_t(sy) * width_ + src_x, size_t(keep) * sizeof(float));
        std::fill(out, out + dst_x, black);                    // left edge when shifting right
        std::fill(out + dst_x + keep, out + width_, black);    // right edge when shifting left
      }
    }
  }
  if (d.flip) {
    for (int64_t row = 0; row < int64_t(channels_) * height_; ++row) std::reverse(image + row * width_, image + (row + 1) * width_);
  }
}

}  // namespace cg::data
