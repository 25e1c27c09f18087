// Builds a training batch on the GPU from a dataset resident there: gathers the sampled images
// and labels and applies data::Augmenter's random crop (padding filled with the black level) and
// horizontal flip, with the same counter-based draws (util/counter_rng.h over seed, rank, epoch, dataset
// index), so a batch is bit-identical to the CPU loader's.
#pragma once
#include <cstdint>

#include "kernels/cuda/memory.h"
#include "util/counter_rng.h"

namespace cg::kernels::cuda {

using GatherAugment = rng::BatchAugment;  // shared with the engine's ops::gather_augment

// indices [n] (device int64, dataset rows), images [rows, c, h, w] float32, labels [rows] int64,
// black [c] float32 -> out_images [n, c, h, w], out_labels [n].
void gather_augment(int64_t n, const int64_t* indices, const float* images, const int64_t* labels, int c, int h,
                    int w, const float* black, const GatherAugment& options, float* out_images, int64_t* out_labels,
                    Stream stream);

}  // namespace cg::kernels::cuda
