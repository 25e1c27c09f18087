// The seed article's SyntheticImageDataset, made learnable: each class has a fixed random
// template, and sample i is its class's template plus noise. Sample i (image and label) is a pure
// function of (seed, split, i), so any worker can produce any sample and runs are reproducible.
// The train and test splits share the class templates and differ in their samples.
#pragma once
#include <vector>

#include "data/dataset.h"

namespace cg::data {

class SyntheticDataset : public Dataset {
 public:
  SyntheticDataset(int64_t size, int channels, int image_size, int num_classes, uint64_t seed,
                   bool train);
  int64_t size() const override { return size_; }
  int channels() const override { return channels_; }
  int height() const override { return image_size_; }
  int width() const override { return image_size_; }
  int num_classes() const override { return num_classes_; }
  std::string name() const override { return "synthetic"; }
  void get(int64_t index, float* image, int64_t* label) const override;

 private:
  int64_t size_;
  int channels_, image_size_, num_classes_;
  uint64_t seed_, split_;
  std::vector<float> templates_;  // num_classes * channels * image_size^2
};

}  // namespace cg::data
