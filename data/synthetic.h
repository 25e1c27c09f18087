// The seed article's SyntheticImageDataset(size, image_size, num_classes), made learnable: each
// class has a fixed random template, and a sample is its class's template plus Gaussian noise,
// scaled so pixels are about zero-mean, unit-variance. Rule: sample i (image and label) is a pure
// function of (seed, split, i), so any worker can produce any sample and runs are reproducible.
// The train and test splits share the class templates and differ in their samples.
#pragma once
#include <vector>

#include "data/dataset.h"

namespace cg::data {

struct SyntheticOptions {
  int64_t size = 50000;
  int channels = 3;
  int image_size = 32;
  int num_classes = 10;
  uint64_t seed = 0;
  bool train = true;  // the split: the same seed gives different train and test samples
  // Fraction of each pixel's variance that comes from the class template (the rest is noise):
  // lower makes the task harder. 0.36 leaves it easy for a CNN yet far from trivial per pixel.
  float signal_variance = 0.36f;
};

class SyntheticDataset : public Dataset {
 public:
  explicit SyntheticDataset(const SyntheticOptions& options);
  int64_t size() const override { return options_.size; }
  int channels() const override { return options_.channels; }
  int height() const override { return options_.image_size; }
  int width() const override { return options_.image_size; }
  int num_classes() const override { return options_.num_classes; }
  std::string name() const override { return "synthetic"; }
  void get(int64_t index, float* image, int64_t* label) const override;

 private:
  SyntheticOptions options_;
  float signal_scale_, noise_scale_;
  std::vector<float> templates_;  // num_classes * channels * image_size^2, each N(0, 1)
};

}  // namespace cg::data
