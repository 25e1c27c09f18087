// One thread per output pixel. Each thread recomputes its sample's draws (a few dozen integer
// mixes): cheaper than a second kernel and a round trip through memory, and it keeps the kernel a
// pure function of its inputs. The draws are util/counter_rng.h's draw_augment, the function
// data::Augmenter calls; kernels/cuda augment_test checks the batches against data::Augmenter.
#include "kernels/cuda/augment.h"
#include "kernels/cuda/dtype.cuh"
#include "kernels/cuda/launch.h"
#include "util/counter_rng.h"

namespace cg::kernels::cuda {
namespace {

// ---- kernel ----

// data::Augmenter::draw and apply: out(y, x) = in(y + dy, x' + dx) with x' = w-1-x when flipped
// (the crop comes first, then the flip), black outside the image.
__global__ void gather_augment_kernel(int64_t n, const int64_t* __restrict__ indices,
                                      const float* __restrict__ images, const int64_t* __restrict__ labels, int c,
                                      int h, int w, const float* __restrict__ black, GatherAugment o,
                                      float* __restrict__ out, int64_t* __restrict__ out_labels) {
  const int64_t plane = int64_t(h) * w, per_image = plane * c, total = n * per_image;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += step) {
    const int64_t b = i / per_image, in_image = i - b * per_image;
    const int ch = int(in_image / plane);
    const int64_t in_plane = in_image - int64_t(ch) * plane;
    const int y = int(in_plane / w), x = int(in_plane - int64_t(y) * w);
    const int64_t row = indices[b];
    const rng::AugmentDraw d =
        o.augment ? rng::draw_augment(o.seed, o.rank, o.epoch, row, o.crop_padding, o.horizontal_flip) : rng::AugmentDraw{};
    const int sy = y + d.shift_y, sx = (d.flip ? w - 1 - x : x) + d.shift_x;
    const bool inside = sy >= 0 && sy < h && sx >= 0 && sx < w;
    out[i] = inside ? images[row * per_image + int64_t(ch) * plane + int64_t(sy) * w + sx] : black[ch];
    if (in_image == 0) out_labels[b] = labels[row];  // one thread per sample writes its label
  }
}

}  // namespace

// ---- launcher ----

void gather_augment(int64_t n, const int64_t* indices, const float* images, const int64_t* labels, int c, int h,
                    int w, const float* black, const GatherAugment& options, float* out_images, int64_t* out_labels,
                    Stream stream) {
  if (n == 0 || int64_t(c) * h * w == 0) return;
  launch_kernel(gather_augment_kernel, "gather_augment_kernel", blocks_for(n * c * h * w), kThreads, 0, as_cuda(stream),
                n, indices, images, labels, c, h, w, black, options, out_images, out_labels);
}

}  // namespace cg::kernels::cuda
