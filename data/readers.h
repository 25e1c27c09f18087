// Readers for the on-disk formats: IDX (MNIST / Fashion-MNIST, gzipped or not) and the CIFAR-10
// binary batches. They validate everything (magic numbers, sizes, counts) and throw cg::Error
// naming the file and the problem: a missing, truncated or corrupt file never crashes training.
#pragma once
#include <string>
#include <vector>

#include "data/image_dataset.h"

namespace cg::data {

// Reads a whole file through zlib, which also passes plain (uncompressed) files through.
std::vector<uint8_t> read_maybe_gzipped(const std::string& path);

// Fashion-MNIST's split from `dir`: train-{images,labels}... or t10k-...; ".gz" or plain.
ImageSet read_idx_split(const std::string& dir, bool train);
// CIFAR-10's split from `dir`: data_batch_1..5.bin or test_batch.bin (also under
// cifar-10-batches-bin/).
ImageSet read_cifar10_split(const std::string& dir, bool train);

}  // namespace cg::data
