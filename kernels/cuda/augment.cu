// One thread per output pixel; each recomputes its sample's draw (a handful of integer mixes,
// cheaper than a second kernel and a round trip through memory).
#include "kernels/cuda/augment.h"
#include "kernels/cuda/dtype.cuh"

namespace cg::kernels::cuda {
namespace {

// data/random.h's splitmix64 and SampleRng, on the device (tests check they agree).
__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;
constexpr uint64_t kAugmentStream = 0xa06e1;  // data::kAugmentStream

struct Rng {
  uint64_t state;
  __device__ Rng(uint64_t seed, uint64_t rank, uint64_t epoch, uint64_t index) {
    uint64_t h = 0x243f6a8885a308d3ull;
    for (uint64_t k : {seed, rank, epoch, index, kAugmentStream}) h = mix64(h ^ mix64(k + kGolden));
    state = h;
  }
  __device__ uint64_t next() {
    state += kGolden;
    return mix64(state);
  }
  __device__ uint64_t below(uint64_t n) { return n ? next() % n : 0; }
  __device__ double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
};

__global__ void gather_augment_kernel(int64_t n, const int64_t* indices, const float* images, const int64_t* labels,
                                      int c, int h, int w, const float* black, GatherAugment o, float* out,
                                      int64_t* out_labels) {
  const int64_t plane = int64_t(h) * w, per_image = plane * c, total = n * per_image;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = i / per_image, ch = i / plane % c;
    const int y = int(i % plane / w), x = int(i % w);
    const int64_t row = indices[b];
    int dy = 0, dx = 0;
    bool flip = false;
    if (o.augment) {
      Rng rng(o.seed, uint64_t(o.rank), uint64_t(o.epoch), uint64_t(row));
      if (o.crop_padding > 0) {
        dy = int(rng.below(uint64_t(2 * o.crop_padding + 1))) - o.crop_padding;
        dx = int(rng.below(uint64_t(2 * o.crop_padding + 1))) - o.crop_padding;
      }
      if (o.horizontal_flip) flip = rng.uniform() < 0.5;
    }
    const int sx = flip ? w - 1 - x : x;  // the flip happens after the crop
    const int iy = y + dy, ix = sx + dx;
    out[i] = (iy < 0 || iy >= h || ix < 0 || ix >= w) ? black[ch] : images[row * per_image + ch * plane + int64_t(iy) * w + ix];
    if (i % per_image == 0) out_labels[b] = labels[row];
  }
}

}  // namespace

void gather_augment(int64_t n, const int64_t* indices, const float* images, const int64_t* labels, int c, int h,
                    int w, const float* black, const GatherAugment& options, float* out_images, int64_t* out_labels,
                    Stream stream) {
  if (n == 0) return;
  gather_augment_kernel<<<blocks_for(n * c * h * w), kThreads, 0, as_cuda(stream)>>>(
      n, indices, images, labels, c, h, w, black, options, out_images, out_labels);
  CG_CUDA_AFTER_LAUNCH("gather_augment_kernel");
}

}  // namespace cg::kernels::cuda
