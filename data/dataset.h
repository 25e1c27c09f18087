// A dataset of labelled images, any of which can be read from any thread. Images come out as
// normalized float32 CHW; how they are stored (uint8 in memory, generated on the fly) is the
// dataset's business.
#pragma once
#include <cstdint>
#include <string>

namespace cg::data {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual int channels() const = 0;
  virtual int height() const = 0;
  virtual int width() const = 0;
  virtual int num_classes() const = 0;
  virtual std::string name() const = 0;
  // Writes image `index` (channels * height * width floats, normalized) and its label.
  virtual void get(int64_t index, float* image, int64_t* label) const = 0;
  int64_t image_numel() const { return int64_t(channels()) * height() * width(); }
};

}  // namespace cg::data
