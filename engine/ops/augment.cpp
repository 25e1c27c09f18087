#include "engine/augment.h"

#include "engine/dispatch.h"
#include "kernels/cuda/augment.h"

namespace cg::ops {

void gather_augment(const Tensor& order, int64_t first, int64_t n, const Tensor& images, const Tensor& labels,
                    const Tensor& black, const GatherAugmentOptions& options, Tensor& out_images,
                    Tensor& out_labels) {
  const Device device = images.device();
  CG_CHECK(images.dim() == 4 && images.dtype() == DType::f32,
           "gather_augment: images {} must be float32 [rows, c, h, w]", images.str());
  const int64_t rows = images.shape()[0], c = images.shape()[1], h = images.shape()[2], w = images.shape()[3];
  CG_CHECK(labels.dtype() == DType::i64 && labels.numel() == rows, "gather_augment: labels {} do not match images {}",
           labels.str(), images.str());
  CG_CHECK(black.dtype() == DType::f32 && black.numel() == c, "gather_augment: black {} needs {} float32 values",
           black.str(), c);
  CG_CHECK(order.dtype() == DType::i64 && first >= 0 && n >= 0 && first + n <= order.numel(),
           "gather_augment: rows [{}, {}) of the order {}", first, first + n, order.str());
  CG_CHECK(out_images.dtype() == DType::f32 && out_images.numel() == n * c * h * w &&
               out_labels.dtype() == DType::i64 && out_labels.numel() == n,
           "gather_augment: outputs {} and {} do not hold {} images of {}x{}x{}", out_images.str(), out_labels.str(), n,
           c, h, w);
  for (const Tensor* t :
       {&order, &labels, &black, static_cast<const Tensor*>(&out_images), static_cast<const Tensor*>(&out_labels)})
    CG_CHECK(t->device() == device, "gather_augment: {} is not on {}", t->str(), device.str());
  ops::detail::on_device(
      "gather_augment", device,
      [&] { CG_FAIL("gather_augment: the dataset must be on a CUDA device, not {} (the CPU augments in the loader)",
                    device.str()); },
      [&] {
        kernels::cuda::gather_augment(n, order.data<int64_t>() + first, images.data<float>(), labels.data<int64_t>(),
                                      int(c), int(h), int(w), black.data<float>(), options, out_images.data<float>(),
                                      out_labels.data<int64_t>(), current_stream(device).handle());
      });
}

}  // namespace cg::ops
