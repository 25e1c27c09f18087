#include "data/synthetic.h"

#include "data/random.h"
#include "util/check.h"

namespace cg::data {

SyntheticDataset::SyntheticDataset(int64_t size, int channels, int image_size, int num_classes,
                                   uint64_t seed, bool train)
    : size_(size), channels_(channels), image_size_(image_size), num_classes_(num_classes),
      seed_(seed), split_(train ? 0 : 1) {
  CG_CHECK(size > 0 && channels > 0 && image_size > 0 && num_classes > 1,
           "synthetic dataset: size {}, channels {}, image size {}, classes {} must be positive", size,
           channels, image_size, num_classes);
  templates_.resize(size_t(num_classes) * size_t(image_numel()));
  SampleRng rng(seed, 0x7e301a7eULL);
  for (float& v : templates_) v = float(rng.normal());
}

void SyntheticDataset::get(int64_t index, float* image, int64_t* label) const {
  CG_CHECK(index >= 0 && index < size_, "synthetic: index {} outside [0, {})", index, size_);
  SampleRng rng(seed_, split_, uint64_t(index), 0x5a3b1e);
  *label = int64_t(rng.below(uint64_t(num_classes_)));
  const float* t = templates_.data() + *label * image_numel();
  // Unit variance overall: 0.6 of template, 0.8 of noise (0.36 + 0.64 = 1).
  for (int64_t i = 0; i < image_numel(); ++i) image[i] = 0.6f * t[i] + 0.8f * float(rng.normal());
}

}  // namespace cg::data
