// Building a training batch on the GPU from a dataset kept there (data.gpu_resident): gathers
// the sampled rows and applies the data layer's random crop and horizontal flip with the same
// counter-based draws (seed, rank, epoch, dataset index), so the batch is bit-identical to the
// CPU loader's. Not differentiable; enqueued on the current stream of the images' device.
#pragma once
#include <cstdint>

#include "engine/tensor.h"
#include "util/counter_rng.h"

namespace cg::ops {

using GatherAugmentOptions = rng::BatchAugment;  // the kernel's own settings (util/counter_rng.h)

// order: int64 [rows'] of dataset rows, of which [first, first + n) are gathered; images
// float32 [rows, c, h, w], labels int64 [rows], black float32 [c] (the padding's value per
// channel); out_images float32 [n, c, h, w] and out_labels int64 [n] are written. All on one
// CUDA device.
void gather_augment(const Tensor& order, int64_t first, int64_t n, const Tensor& images, const Tensor& labels,
                    const Tensor& black, const GatherAugmentOptions& options, Tensor& out_images,
                    Tensor& out_labels);

}  // namespace cg::ops
