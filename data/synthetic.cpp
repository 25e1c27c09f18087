#include "data/synthetic.h"

#include <cmath>

#include "data/random.h"
#include "util/check.h"

namespace cg::data {

SyntheticDataset::SyntheticDataset(const SyntheticOptions& options) : options_(options) {
  CG_CHECK(options.size > 0 && options.channels > 0 && options.image_size > 0 && options.num_classes > 1,
           "synthetic dataset: size {}, channels {}, image size {} must be positive and classes {} > 1",
           options.size, options.channels, options.image_size, options.num_classes);
  CG_CHECK(options.signal_variance >= 0.0f && options.signal_variance <= 1.0f,
           "synthetic dataset: signal variance {} outside [0, 1]", options.signal_variance);
  signal_scale_ = std::sqrt(options.signal_variance);
  noise_scale_ = std::sqrt(1.0f - options.signal_variance);
  const int64_t numel = image_numel();
  templates_.resize(size_t(options.num_classes * numel));
  for (int k = 0; k < options.num_classes; ++k) {
    // One generator per class: a class's template does not depend on how many classes there are.
    SampleRng rng(options.seed, uint64_t(k), kSyntheticTemplateStream);
    for (int64_t i = 0; i < numel; ++i) templates_[size_t(k * numel + i)] = float(rng.normal());
  }
}

void SyntheticDataset::get(int64_t index, float* image, int64_t* label) const {
  CG_CHECK(index >= 0 && index < options_.size, "synthetic: index {} outside [0, {})", index, options_.size);
  SampleRng rng(options_.seed, uint64_t(options_.train ? 0 : 1), uint64_t(index), kSyntheticSampleStream);
  *label = int64_t(rng.below(uint64_t(options_.num_classes)));
  const int64_t numel = image_numel();
  const float* t = templates_.data() + *label * numel;
  for (int64_t i = 0; i < numel; ++i) image[i] = signal_scale_ * t[i] + noise_scale_ * float(rng.normal());
}

}  // namespace cg::data
