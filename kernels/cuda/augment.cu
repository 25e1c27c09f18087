// One thread per output pixel. Each thread recomputes its sample's draws (a few dozen integer
// mixes): cheaper than a second kernel and a round trip through memory, and it keeps the kernel a
// pure function of its inputs. The random numbers replicate data/random.h bit for bit (that header
// is C++20 and cannot be included by nvcc's C++17); kernels/cuda augment_test checks the batches
// against data::Augmenter.
#include "kernels/cuda/augment.h"
#include "kernels/cuda/dtype.cuh"

namespace cg::kernels::cuda {
namespace {

// ---- data/random.h on the device ----

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;  // splitmix64's Weyl increment
constexpr uint64_t kAugmentStream = 0xa06e1;         // data::kAugmentStream

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// data::SampleRng seeded with the keys (seed, rank, epoch, index, kAugmentStream), in that order.
struct AugmentRng {
  uint64_t state;
  __device__ AugmentRng(uint64_t seed, uint64_t rank, uint64_t epoch, uint64_t index) {
    const uint64_t keys[5] = {seed, rank, epoch, index, kAugmentStream};
    uint64_t h = 0x243f6a8885a308d3ull;
    for (int k = 0; k < 5; ++k) h = mix64(h ^ mix64(keys[k] + kGolden));
    state = h;
  }
  __device__ uint64_t next() {
    state += kGolden;
    return mix64(state);
  }
  __device__ uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  __device__ double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
};

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
    int dy = 0, dx = 0;
    bool flip = false;
    if (o.augment) {
      AugmentRng rng(o.seed, uint64_t(int64_t(o.rank)), uint64_t(o.epoch), uint64_t(row));
      if (o.crop_padding > 0) {
        const uint64_t choices = uint64_t(2 * o.crop_padding + 1);
        dy = int(rng.below(choices)) - o.crop_padding;  // drawn before dx, as on the CPU
        dx = int(rng.below(choices)) - o.crop_padding;
      }
      if (o.horizontal_flip) flip = rng.uniform() < 0.5;
    }
    const int sy = y + dy, sx = (flip ? w - 1 - x : x) + dx;
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
  gather_augment_kernel<<<blocks_for(n * c * h * w), kThreads, 0, as_cuda(stream)>>>(
      n, indices, images, labels, c, h, w, black, options, out_images, out_labels);
  CG_CUDA_AFTER_LAUNCH("gather_augment_kernel");
}

}  // namespace cg::kernels::cuda
