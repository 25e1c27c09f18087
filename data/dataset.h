// A dataset of labelled images, any of which can be read from any thread. Images come out as
// normalized float32 CHW; how they are stored (uint8 in memory, generated on the fly) is the
// dataset's business. Rule: get() is const and thread-safe, and its result depends on the index
// alone, so loaders may read samples in any order from any number of threads.
#pragma once
#include <cstdint>
#include <string>

namespace cg::data {

// Which part of a dataset: the training images or the held-out test images.
enum class Split { train, test };

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual int channels() const = 0;
  virtual int height() const = 0;
  virtual int width() const = 0;
  virtual int num_classes() const = 0;
  virtual std::string name() const = 0;
  // Writes image `index` (channels * height * width floats, normalized, CHW) and its label in
  // [0, num_classes). Throws cg::Error for an index outside [0, size()).
  virtual void get(int64_t index, float* image, int64_t* label) const = 0;
  // The value a black (0) pixel of `channel` has after normalization: what padding fills with,
  // so a padded border looks like black to the model. Datasets without pixels use 0, their mean.
  virtual float black_level(int channel) const { return 0.0f; }

  int64_t image_numel() const { return int64_t(channels()) * height() * width(); }
};

}  // namespace cg::data
