// Training-time augmentation of normalized CHW images: a random crop after padding every side
// (torchvision's RandomCrop(size, padding)) and a random horizontal flip with probability 1/2.
// The padding is black, i.e. the dataset's black_level(), as when RandomCrop runs on pixels before
// ToTensor/Normalize. Rule: the choices for a sample are a pure function of (seed, rank, epoch,
// sample index), never of the worker that runs it or what ran before; different ranks differ.
#pragma once
#include <cstdint>
#include <vector>

#include "data/dataset.h"
#include "util/counter_rng.h"

namespace cg::data {

struct AugmentOptions {
  bool enabled = false;
  int crop_padding = 4;  // pixels added on every side before cropping back; 0: no crop
  bool horizontal_flip = true;
};

// Everything the random choices for one sample depend on.
struct SampleKey {
  uint64_t seed = 0;
  int rank = 0;
  int64_t epoch = 0;
  int64_t index = 0;  // the dataset index
};

// The choices drawn for one sample: rng::draw_augment, which the GPU's batch builder runs too.
using AugmentDraw = rng::AugmentDraw;

class Augmenter {
 public:
  // Takes the image shape and the black level per channel from `dataset`.
  Augmenter(AugmentOptions options, const Dataset& dataset);
  // The choices for `key` (exposed for tests and for explaining a run).
  AugmentDraw draw(const SampleKey& key) const;
  // Augments one image of the dataset's shape in place. Const and thread-safe; does nothing
  // unless options.enabled.
  void apply(float* image, const SampleKey& key) const;

 private:
  AugmentOptions options_;
  int channels_, height_, width_;
  std::vector<float> black_;  // per channel
};

}  // namespace cg::data
