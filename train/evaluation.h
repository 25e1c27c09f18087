// Evaluation on the test set: each rank evaluates its shard of it in eval mode, without
// gradients (on a GPU under the same autocast as training), and the sums are added over ranks.
#pragma once
#include <cstdint>

#include "data/dataset.h"
#include "nn/miniresnet.h"
#include "train/distributed.h"
#include "train/train_config.h"

namespace cg::train {

struct EvalResult {
  double loss = 0, accuracy = 0, images_per_s = 0;
  int64_t images = 0;  // evaluated over all ranks: the test set's size
};
// The shards are not padded (unlike training's), so every test image counts once, whatever the
// number of ranks. Leaves the model in train mode.
EvalResult evaluate(nn::MiniResNet& model, const data::Dataset& test_set, const TrainConfig& c, DistContext& dc,
                    Device device);

}  // namespace cg::train
