#include "train/device_setup.h"

#include <omp.h>

#include <thread>

#include "engine/ops.h"
#include "engine/runtime.h"
#include "util/log.h"

namespace cg::train {

void set_compute_threads(const TrainConfig& c, int world_size) {
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  omp_set_num_threads(c.train.threads > 0 ? int(c.train.threads) : std::max(1, cores / std::max(1, world_size)));
}

Device choose_device(const TrainConfig& c, int local_rank) {
  const int gpus = runtime::device_count();
  if (c.train.device == DeviceName::cpu || (c.train.device == DeviceName::auto_select && gpus == 0)) {
    const std::string why = c.train.device == DeviceName::cpu ? "train.device=cpu" : "no CUDA device is visible";
    if (c.amp.enabled)
      throw UsageError(fmt::format("amp.enabled=true needs a GPU ({}); set amp.enabled=false to train in float32 "
                                   "on the CPU", why));
    if (c.dist.backend == dist::BackendRequest::nccl)
      throw UsageError(fmt::format("dist.backend=nccl needs GPUs ({}); use gloo or auto", why));
    log::info("device: cpu ({} threads)", omp_get_max_threads());
    return Device::cpu();
  }
  if (gpus == 0)
    throw Error(fmt::format("train.device=cuda but no CUDA device is visible ({})", runtime::describe_device(0)));
  const Device device = Device::cuda(local_rank % gpus);
  runtime::set_device(device);
  log::info("device: {} ({}){}", device.str(), runtime::describe_device(device.index),
            c.amp.enabled ? fmt::format(", mixed precision {}", enum_name(c.amp.dtype)) : "");
  return device;
}

}  // namespace cg::train
