// Training-time augmentation on normalized CHW float images: random crop with zero padding (pad
// pixels on every side, then a crop back to the original size; "zero" is 0 after normalization,
// i.e. the dataset mean, as torchvision's RandomCrop on a normalized tensor) and random
// horizontal flip with probability 1/2. The choices come from the caller's SampleRng.
#pragma once
#include <vector>

#include "data/random.h"

namespace cg::data {

struct AugmentOptions {
  bool enabled = false;
  int crop_padding = 4;  // pixels; 0 disables the crop
  bool horizontal_flip = true;
};

// Augments one image in place; `scratch` is reused between calls to avoid allocating.
void augment_image(const AugmentOptions& options, int channels, int height, int width, float* image,
                   SampleRng& rng, std::vector<float>& scratch);

}  // namespace cg::data
