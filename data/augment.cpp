#include "data/augment.h"

#include <algorithm>
#include <cstring>

namespace cg::data {

void augment_image(const AugmentOptions& o, int channels, int height, int width, float* image,
                   SampleRng& rng, std::vector<float>& scratch) {
  if (!o.enabled) return;
  const int64_t plane = int64_t(height) * width;
  if (o.crop_padding > 0) {
    const int p = o.crop_padding;
    // Offset of the crop window inside the padded image, in [0, 2p]; (p, p) is no shift.
    const int dy = int(rng.below(uint64_t(2 * p + 1))) - p;
    const int dx = int(rng.below(uint64_t(2 * p + 1))) - p;
    if (dy != 0 || dx != 0) {
      scratch.assign(image, image + channels * plane);
      for (int c = 0; c < channels; ++c)
        for (int y = 0; y < height; ++y) {
          float* out = image + c * plane + int64_t(y) * width;
          const int sy = y + dy;
          if (sy < 0 || sy >= height) {
            std::fill(out, out + width, 0.0f);
            continue;
          }
          const float* in = scratch.data() + c * plane + int64_t(sy) * width;
          for (int x = 0; x < width; ++x) {
            const int sx = x + dx;
            out[x] = (sx >= 0 && sx < width) ? in[sx] : 0.0f;
          }
        }
    }
  }
  if (o.horizontal_flip && (rng.next() & 1)) {
    for (int c = 0; c < channels; ++c)
      for (int y = 0; y < height; ++y) {
        float* row = image + c * plane + int64_t(y) * width;
        std::reverse(row, row + width);
      }
  }
}

}  // namespace cg::data
