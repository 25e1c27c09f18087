// The pieces the training loop is assembled from: datasets, optimizer and schedule built from the
// config, batches as tensors, the sharded evaluation, and checkpoint bookkeeping.
#include "train/training_parts.h"

#include <omp.h>
#include <zlib.h>

#include <thread>

#include "data/dataset_factory.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "data/device_feeder.h"
#include "train/window_stats.h"
#include "engine/autocast.h"
#include "engine/autograd/grad_mode.h"
#include "engine/ops.h"
#include "engine/runtime.h"
#include "util/log.h"

namespace cg::train {
namespace fs = std::filesystem;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void set_compute_threads(const TrainConfig& c, int world_size) {
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  omp_set_num_threads(c.train.threads > 0 ? int(c.train.threads) : std::max(1, cores / std::max(1, world_size)));
}

std::unique_ptr<data::Dataset> make_split(const TrainConfig& c, Split split) {
  const bool train = split == Split::train;
  data::DatasetOptions o;
  o.kind = c.data.dataset;
  o.path = c.data.path;
  o.train = train;
  o.image_size = int(c.data.image_size);
  o.synthetic_size = train ? c.data.synthetic_size : std::max<int64_t>(c.data.synthetic_size / 5, 1);
  o.synthetic_channels = int(c.model.in_channels);
  o.num_classes = int(c.model.num_classes);
  o.seed = uint64_t(c.train.seed);
  return data::make_dataset(o);
}

nn::MiniResNetOptions model_options(const TrainConfig& c) {
  nn::MiniResNetOptions mo;
  mo.in_channels = c.model.in_channels;
  mo.num_classes = c.model.num_classes;
  mo.widths = c.model.widths;
  mo.blocks = c.model.blocks;
  mo.layout = c.model.channels_last ? ops::Layout::nhwc : ops::Layout::nchw;
  return mo;
}

std::unique_ptr<nn::Optimizer> make_optimizer(const TrainConfig& c, const nn::Module& model) {
  if (c.optim.name == OptimizerName::sgd) {
    nn::SgdOptions h;
    h.lr = float(c.optim.lr);
    h.momentum = float(c.optim.momentum);
    h.weight_decay = float(c.optim.weight_decay);
    h.nesterov = c.optim.nesterov;
    return std::make_unique<nn::SGD>(model.named_parameters(), h);
  }
  nn::AdamWOptions h;
  h.lr = float(c.optim.lr);
  h.beta1 = float(c.optim.beta1);
  h.beta2 = float(c.optim.beta2);
  h.eps = float(c.optim.eps);
  h.weight_decay = float(c.optim.weight_decay);
  return std::make_unique<nn::AdamW>(model.named_parameters(), h);
}

EvalResult evaluate(nn::MiniResNet& model, const data::Dataset& test_set, const TrainConfig& c, DistContext& dc,
                    Device device) {
  autograd::NoGradGuard no_grad;
  autocast::Scope autocast({.enabled = c.amp.enabled, .dtype = c.amp.dtype == AmpDtype::bf16 ? DType::bf16 : DType::f16});
  model.eval();
  data::DistributedSampler sampler(test_set.size(), dc.rank(), dc.world_size(),
                                   {.shuffle = false, .seed = 0, .drop_last = false, .pad = false});
  data::LoaderOptions lo;
  lo.batch_size = c.train.eval_batch_size;
  lo.num_workers = int(c.data.num_workers);
  lo.drop_last = false;
  data::DataLoader loader(test_set, sampler, lo);
  data::DeviceFeeder feeder(loader, device, current_stream(device));
  feeder.start_epoch(0, 0);
  WindowStats stats;
  const auto start = Clock::now();
  while (auto batch = feeder.next()) {
    Tensor hits;
    const Tensor loss = ops::cross_entropy(model(batch->images), batch->labels, &hits);
    stats.add(loss, hits, batch->size);
  }
  model.train();
  const WindowSums w = stats.flush(0);
  std::vector<double> sums{w.loss_sum, w.correct, w.images};
  dc.all_reduce_sum(sums);
  EvalResult r;
  r.loss = sums[0] / std::max(sums[2], 1.0);
  r.accuracy = sums[1] / std::max(sums[2], 1.0);
  r.images = int64_t(sums[2]);
  r.images_per_s = sums[2] / std::max(seconds_since(start), 1e-9);
  return r;
}

std::unique_ptr<dist::DistributedDataParallel> make_ddp(const TrainConfig& c, DistContext& dc, nn::Module& model,
                                                        Device device) {
  auto comm = dc.make_gradient_comm(c.dist, device);
  if (!comm) return nullptr;
  dist::DdpOptions options;
  options.bucket_cap_mb = c.dist.bucket_cap_mb;
  options.zero_sharding = c.optim.zero_sharding;
  options.grad_compression = c.dist.grad_compression;
  auto ddp = std::make_unique<dist::DistributedDataParallel>(model, std::move(comm), options);
  const dist::GradientBuckets& buckets = ddp->reducer().buckets();
  const std::string wire = c.dist.grad_compression == dist::GradCompression::none
                               ? std::string("float32")
                               : fmt::format("{} compressed", enum_name(c.dist.grad_compression));
  if (options.zero_sharding)  // from the second step on; the first is all-reduced
    log::info("DDP: {} gradient buckets over {}, {} bytes reduce-scattered per step ({}), {} bytes of parameters "
              "all-gathered (float32)",
              buckets.size(), ddp->comm().name(), buckets.bytes_per_step(), wire,
              ddp->sharded()->gather_bytes_per_step());
  else
    log::info("DDP: {} gradient buckets over {}, {} bytes all-reduced per step ({})", buckets.size(),
              ddp->comm().name(), buckets.bytes_per_step(), wire);
  if (const double modeled = dist::modeled_ms_per_step(buckets, ddp->comm()); modeled > 0)
    log::info("DDP: the ring model's time for one step's collectives: {:.4f} ms", modeled);
  return ddp;
}

std::unique_ptr<dist::SyncBatchNorm> make_sync_batchnorm(const TrainConfig& c, DistContext& dc, nn::Module& model,
                                                         dist::DistributedDataParallel* ddp) {
  if (!c.model.sync_batchnorm || !ddp || dc.world_size() == 1) return nullptr;  // one real rank: nothing to sync
  auto sync = std::make_unique<dist::SyncBatchNorm>(model, ddp->comm());
  log::info("SyncBatchNorm: {} batch-norm layers, statistics over {} ranks", sync->num_layers(), dc.world_size());
  return sync;
}

Device choose_device(const TrainConfig& c, int local_rank) {
  ops::set_cpu_conv(c.kernels.cpu_conv);  // CPU layers run on a GPU machine too (evaluation, tests)
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
  ops::set_gpu_kernels({c.kernels.conv, c.kernels.batch_norm});
  runtime::set_conv_algo_search(c.kernels.cudnn_algo_search);
  log::info("device: {} ({}){}", device.str(), runtime::describe_device(device.index),
            c.amp.enabled ? fmt::format(", mixed precision {}", enum_name(c.amp.dtype)) : "");
  return device;
}

bool restarted_by_launcher() {
  const char* v = std::getenv("CUDAGRAD_RESTART");
  return v && std::atoi(v) > 0;
}

std::string latest_checkpoint(const fs::path& dir) {
  std::string best;
  fs::file_time_type best_time{};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".safetensors") continue;
    const auto t = e.last_write_time(ec);
    if (best.empty() || t > best_time) {
      best = e.path().string();
      best_time = t;
    }
  }
  return best;
}

uint32_t state_fingerprint(const nn::Module& model) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (const auto& [name, live] : model.state_dict()) {
    const Tensor t = live.to(Device::cpu());
    crc = crc32(crc, static_cast<const Bytef*>(t.raw_data()), uInt(t.nbytes()));
  }
  return uint32_t(crc);
}


}  // namespace cg::train
