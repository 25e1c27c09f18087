// Where this process computes: the CPU threads it uses and the device it trains on, chosen from
// the config and this rank's place on its machine.
#pragma once
#include "engine/device.h"
#include "train/train_config.h"

namespace cg::train {

// OpenMP threads for CPU compute: train.threads, or this machine's cores shared by the ranks on it.
void set_compute_threads(const TrainConfig& c, int world_size);
// Where to train: the GPU local_rank % visible GPUs (made current) when train.device is cuda, or
// auto and a GPU is visible; else the CPU. Fails clearly for a GPU-only setting without a GPU.
// Logs what is used.
Device choose_device(const TrainConfig& c, int local_rank);

}  // namespace cg::train
