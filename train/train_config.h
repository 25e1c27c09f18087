// The training configuration as a plain struct: the seed article's TrainingConfig plus the model,
// data and schedule choices. Rule: each field's key is its path (`optim.lr` is `config.optim.lr`)
// and its default is the initializer below; train_config.cpp adds types, ranges and help, and
// `cudagrad-train --help` prints them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset_factory.h"
#include "dist/backend_choice.h"
#include "dist/grad_compression.h"
#include "dist/sharding.h"
#include "engine/ops.h"
#include "engine/runtime.h"
#include "nn/lr_schedule.h"
#include "util/enum_names.h"

namespace cg::train {

// The library's own enums are the config's (data::DatasetKind, nn::ScheduleKind,
// dist::BackendRequest, ops::GpuImpl, ops::ConvAlgoSearch), named by their tables; these are
// the choices only the config makes.
enum class OptimizerName { sgd, adamw };
enum class DeviceName { auto_select, cpu, cuda };  // "auto": CUDA when available
enum class AmpDtype { fp16, bf16 };
enum class ModeledLink { nvlink, infiniband };
// train.cuda_graph: "auto" captures the step wherever the run allows it (cuda_graph_refusal says
// when it does not), "true" insists (a config that cannot is refused), "false" runs it eagerly.
enum class CudaGraphMode { automatic, on, off };
// checkpoint.format, as FSDP's StateDictType: the whole state in one file rank 0 writes
// (FULL_STATE_DICT; PyTorch loads it), or a folder of every rank's own pieces (SHARDED_STATE_DICT;
// nn/sharded_checkpoint.h).
enum class CheckpointFormat { full, sharded };
inline EnumNames<CheckpointFormat> enum_names(CheckpointFormat) {
  return {{CheckpointFormat::full, "full"}, {CheckpointFormat::sharded, "sharded"}};
}

inline EnumNames<OptimizerName> enum_names(OptimizerName) {
  return {{OptimizerName::sgd, "sgd"}, {OptimizerName::adamw, "adamw"}};
}
inline EnumNames<DeviceName> enum_names(DeviceName) {
  return {{DeviceName::auto_select, "auto"}, {DeviceName::cpu, "cpu"}, {DeviceName::cuda, "cuda"}};
}
inline EnumNames<AmpDtype> enum_names(AmpDtype) { return {{AmpDtype::fp16, "fp16"}, {AmpDtype::bf16, "bf16"}}; }
inline EnumNames<CudaGraphMode> enum_names(CudaGraphMode) {
  return {{CudaGraphMode::automatic, "auto"}, {CudaGraphMode::on, "true"}, {CudaGraphMode::off, "false"}};
}
inline EnumNames<ModeledLink> enum_names(ModeledLink) {
  return {{ModeledLink::nvlink, "nvlink"}, {ModeledLink::infiniband, "infiniband"}};
}

struct TrainConfig {
  struct Model {  // MiniResNet
    std::vector<int64_t> widths{64, 128, 256};  // channels of each stage
    std::vector<int64_t> blocks{2, 2, 2};       // BasicBlocks per stage (as many as widths)
    int64_t in_channels = 0;  // 0 = the dataset's: 1 for Fashion-MNIST, 3 for CIFAR-10 and synthetic
    int64_t num_classes = 10;
    std::string init_from;  // safetensors weights to start from; "" = random init
    bool channels_last = false;  // NHWC activations (GPU: cuDNN tensor-core convolutions); same weights
    bool sync_batchnorm = false;  // batch-norm statistics over all ranks (dist/sync_batch_norm.h)
    bool operator==(const Model&) const = default;
  } model;
  struct Data {
    data::DatasetKind dataset = data::DatasetKind::fashion_mnist;
    std::string path;            // "" = the dataset's default folder
    int64_t image_size = 0;      // 0 = the dataset's native size
    int64_t batch_size = 64;     // per rank
    int64_t num_workers = 4;     // loader threads; 0 = load on the training thread
    bool shuffle = true;         // reshuffled every epoch from seed + epoch
    bool augment = true;         // random crop (padding 4) and horizontal flip
    int64_t synthetic_size = 50000;  // images in the synthetic training split
    bool gpu_resident = false;   // training images kept on the GPU, batches gathered and augmented there
    bool operator==(const Data&) const = default;
  } data;
  struct Optim {
    OptimizerName name = OptimizerName::sgd;
    double lr = 0.01;  // the peak rate the schedule scales
    double momentum = 0.9;
    bool nesterov = false;
    double weight_decay = 1e-4;  // L2 for SGD, decoupled for AdamW (as PyTorch)
    double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // AdamW only
    bool zero_sharding = false;  // the older name of dist.sharding=optimizer; read into it, then false
    bool operator==(const Optim&) const = default;
  } optim;
  struct Sched {
    nn::ScheduleKind name = nn::ScheduleKind::cosine;
    int64_t warmup_steps = 0;  // warmup_cosine only
    double min_lr = 0.0;       // where the cosine ends
    bool operator==(const Sched&) const = default;
  } sched;
  struct Train {
    int64_t epochs = 10;
    int64_t max_steps = 0;  // optimizer steps; 0 = no limit
    int64_t grad_accum_steps = 1;
    int64_t seed = 42;
    int64_t log_interval = 10;  // optimizer steps between metric lines
    DeviceName device = DeviceName::auto_select;
    int64_t threads = 0;  // CPU compute threads; 0 = all cores
    int64_t eval_batch_size = 256;
    double target_accuracy = 0;  // stop once an evaluation reaches it; 0 = train every epoch
    CudaGraphMode cuda_graph = CudaGraphMode::automatic;  // GPU: capture the step once as a CUDA graph, replay it
    bool operator==(const Train&) const = default;
  } train;
  struct Amp {
    bool enabled = false;  // mixed precision needs CUDA; the CPU trains in float32
    AmpDtype dtype = AmpDtype::fp16;
    bool operator==(const Amp&) const = default;
  } amp;
  // Which implementation each op family uses: the engine's own value (engine/kernel_policy.h),
  // handed to the model the session builds.
  ops::KernelPolicy kernels;
  struct Checkpoint {
    std::string dir;          // "" = <output.dir>/checkpoints
    int64_t save_every = 1;   // epochs; 0 = only at the end
    std::string resume_from;  // "" = start fresh (a checkpoint file, or a sharded checkpoint's folder)
    CheckpointFormat format = CheckpointFormat::full;
    bool operator==(const Checkpoint&) const = default;
  } checkpoint;
  struct Dist {
    dist::BackendRequest backend = dist::BackendRequest::auto_select;
    double bucket_cap_mb = 4.0;  // gradient bucket size (see train_config.cpp for why not 25)
    double timeout_s = 120.0;    // longest wait for a peer or a collective
    int64_t modeled_world_size = 8;  // dist.backend=modeled: the ring being modeled
    ModeledLink modeled_link = ModeledLink::nvlink;
    dist::GradCompression grad_compression = dist::GradCompression::none;  // 16-bit gradient all-reduce
    dist::Sharding sharding = dist::Sharding::no_shard;  // what each rank keeps (dist/sharding.h)
    dist::ParamDType param_dtype = dist::ParamDType::float32;  // what full_shard's gathers move
    bool operator==(const Dist&) const = default;
  } dist;
  struct Output {
    std::string dir = "runs/latest";  // config.yaml, metrics.jsonl, checkpoints
    bool operator==(const Output&) const = default;
  } output;
  struct Profile {
    bool enabled = false;  // write a Chrome-trace timeline
    bool operator==(const Profile&) const = default;
  } profile;
  bool operator==(const TrainConfig&) const = default;
};

// Loads `yaml_path` (empty: defaults only), applies key=value overrides, and checks the rules
// that span keys (widths and blocks of equal length, ...). Throws cg::UsageError naming the key
// and where it was set on any unknown key, wrong type, out-of-range value or inconsistency. A key
// that the chosen variant does not read (sched.warmup_steps with sched.name=constant, optim.beta1
// with sgd, ...) is not an error: one warning each, naming the key and why, goes to `warnings`
// or, when that is null, to the log (rank 0).
TrainConfig load_train_config(const std::string& yaml_path, const std::vector<std::string>& overrides,
                              std::vector<std::string>* warnings = nullptr);
// The resolved config as YAML, every key; load_train_config() of it gives an equal config.
std::string to_yaml(const TrainConfig& config);
// Why the config's step cannot be captured as one CUDA graph, naming the key that prevents it
// ("" when nothing does): a graph replays device work only, so host work in the step (Gloo's
// all-reduce, a profiler's phases) or work that changes between steps (accumulation's
// micro-batches, ZeRO-1 after its first step) cannot be in one. The CPU has no graphs at all.
std::string cuda_graph_refusal(const TrainConfig& c);
// Every key with its type, allowed values, default and meaning.
std::string train_config_help();
// The same as Markdown tables, one per group: docs/config.md's generated part.
std::string train_config_reference();

}  // namespace cg::train
