// The schema of TrainConfig: one row per field giving its range and help; the key is the field's
// path and the type and default come from the field itself. Rule: one table serves loading,
// to_yaml and help, so no key can be known to one of them and missing from another.
#include "train/train_config.h"

#include <iterator>
#include <type_traits>
#include <utility>

#include "dist/gradient_comm.h"
#include "train/builders.h"
#include "util/check.h"
#include "util/config.h"
#include "util/log.h"

namespace cg::train {
namespace {

using config::Kind;
using config::Value;

template <typename T>
Kind kind_of() {
  if constexpr (std::is_enum_v<T>) return Kind::choice;
  else if constexpr (std::is_same_v<T, bool>) return Kind::boolean;
  else if constexpr (std::is_same_v<T, int64_t>) return Kind::integer;
  else if constexpr (std::is_same_v<T, double>) return Kind::real;
  else if constexpr (std::is_same_v<T, std::string>) return Kind::string;
  else {
    static_assert(std::is_same_v<T, std::vector<int64_t>>, "TrainConfig field of a type config cannot hold");
    return Kind::int_list;
  }
}

template <typename T>
void assign(T& field, const Value& v) {
  if constexpr (std::is_enum_v<T>) {
    const std::string& name = std::get<std::string>(v);
    for (const auto& [e, n] : enum_names(T{}))
      if (name == n) return void(field = e);
    CG_FAIL("no enum value named {}", name);  // cannot happen: load() checked the choices
  } else {
    field = std::get<T>(v);
  }
}

template <typename T>
Value value_of(const T& field) {
  if constexpr (std::is_enum_v<T>) {
    for (const auto& [e, n] : enum_names(T{}))
      if (e == field) return std::string(n);
    CG_FAIL("enum value without a name");
  } else {
    return field;
  }
}

// Upper bounds on every size. Rule: a size the config lets through must not crash the program;
// without a bound, `model.blocks: [2, 2, 99999999999]` passed and the allocations then ended the
// process in std::terminate. Each bound is far beyond any run this engine is for (the full
// MiniResNet has widths of 256, 2 blocks per stage and batches of 64 to 1024) and low enough that
// every count derived from it stays small next to int64 (batch x channels x pixels).
constexpr double kMaxWidth = 4096;          // channels of a stage (ResNets stop at 2048)
constexpr double kMaxBlocks = 256;          // BasicBlocks per stage (ResNet-152's largest stage has 36)
constexpr double kMaxInChannels = 1024;     // image channels
constexpr double kMaxClasses = 1 << 20;     // ImageNet-21k has 21,841
constexpr double kMaxBatch = 1 << 16;       // images per step per rank, training or evaluation
constexpr double kMaxSynthetic = 1e8;       // synthetic images (generated on the fly, not held)
constexpr double kMaxBucketMb = 1 << 16;    // a bucket is cut from the gradients, never larger
constexpr double kMaxTimeoutS = 7 * 86400;  // a week: any longer is a hang, and the seconds must fit a clock
// Stages of the model: ResNets have 4 or 5. Each stage's width and depth are bounded, the list's
// length was not: width 1 in a million stages is a small model whose backward graph is millions of
// nodes deep.
constexpr size_t kMaxStages = 32;
// Epochs and steps: far past any run, and low enough that steps per epoch (at most 1e8 batches of
// one synthetic image) times epochs stays a small fraction of int64: 1e8 * 1e6 = 1e14.
constexpr double kMaxEpochs = 1e6;
constexpr double kMaxSteps = 1e15;
// Parameters of the model as a whole: 2^30 is 4 GiB of float32 weights, which training holds
// about 4 times over (weights, gradients, two AdamW moments): 16 GiB before any activation. Far
// above MiniResNet (2.8 million), and below what one process can allocate on the machines it is
// for; widths and blocks each in bounds can still multiply past it.
constexpr double kMaxParameters = double(1 << 30);

// What a key allows beyond its type.
struct Limits {
  std::optional<double> min, max;
  std::function<std::string(const Value&)> check;
};
Limits any() { return {}; }
Limits at_least(double lo) { return {lo, std::nullopt, {}}; }
Limits between(double lo, double hi) { return {lo, hi, {}}; }
Limits below_one() {  // [0, 1) for Adam's betas
  return {0.0, std::nullopt, [](const Value& v) { return std::get<double>(v) < 1 ? "" : "must be < 1"; }};
}
Limits stages(double most) {  // a non-empty list of at most kMaxStages sizes in [1, most]
  return {1.0, most, [](const Value& v) -> std::string {
            const size_t n = std::get<std::vector<int64_t>>(v).size();
            if (n == 0) return "needs at least one stage";
            if (n > kMaxStages) return fmt::format("has {} stages; at most {} are allowed", n, kMaxStages);
            return "";
          }};
}
Limits positive_at_most(double most) {  // (0, most] for a float, where min would allow 0
  return {std::nullopt, most, [](const Value& v) { return std::get<double>(v) > 0 ? "" : "must be > 0"; }};
}

struct Field {
  config::KeySpec spec;
  void (*read)(TrainConfig&, const Value&);
  Value (*write)(const TrainConfig&);
};

template <typename T>
Field make_field(const char* key, const T& default_value, Limits limits, const char* help,
                 void (*read)(TrainConfig&, const Value&), Value (*write)(const TrainConfig&)) {
  config::KeySpec s;
  s.name = key;
  s.kind = kind_of<T>();
  s.default_value = value_of(default_value);
  s.help = help;
  s.min = limits.min;
  s.max = limits.max;
  s.check = std::move(limits.check);
  if constexpr (std::is_enum_v<T>)
    for (const auto& [e, n] : enum_names(T{})) s.choices.push_back(n);
  return {std::move(s), read, write};
}

// The key is the member's path as written ("optim.lr"); the default is TrainConfig{}'s value.
#define CG_FIELD(member, limits, help)                                                      \
  make_field(#member, TrainConfig{}.member, limits, help,                                   \
             [](TrainConfig& c, const Value& v) { assign(c.member, v); },                   \
             [](const TrainConfig& c) { return value_of(c.member); })

// The keys of each section of the config, in the order config.yaml and --print-config list them.
std::vector<Field> model_fields() {
  return {
      CG_FIELD(model.widths, stages(kMaxWidth), "channels of each stage"),
      CG_FIELD(model.blocks, stages(kMaxBlocks), "BasicBlocks per stage, one entry per width"),
      CG_FIELD(model.in_channels, between(0, kMaxInChannels),
               "image channels; 0 = the dataset's (1 for Fashion-MNIST, 3 for CIFAR-10 and synthetic)"),
      CG_FIELD(model.num_classes, between(2, kMaxClasses), "output classes"),
      CG_FIELD(model.init_from, any(), "safetensors weights to start from (\"\" = random init)"),
      CG_FIELD(model.channels_last, any(), "NHWC activations (GPU: cuDNN reads them without transposes); same weights"),
      CG_FIELD(model.sync_batchnorm, any(),
               "SyncBatchNorm: training batch-norm statistics over all ranks' batches (one all-reduce per layer "
               "and direction); no-op with one process"),
  };
}

std::vector<Field> data_fields() {
  return {
      CG_FIELD(data.dataset, any(), "which dataset"),
      CG_FIELD(data.path, any(), "dataset folder (\"\" = the dataset's default)"),
      CG_FIELD(data.image_size, between(0, 4096), "image side; 0 = native, larger pads"),
      CG_FIELD(data.batch_size, between(1, kMaxBatch), "images per step per rank"),
      CG_FIELD(data.num_workers, between(0, 256), "loader threads (0 = load on the training thread)"),
      CG_FIELD(data.shuffle, any(), "reshuffle every epoch (seed + epoch)"),
      CG_FIELD(data.augment, any(), "random crop (padding 4) and horizontal flip"),
      CG_FIELD(data.synthetic_size, between(1, kMaxSynthetic), "images in the synthetic training split"),
      CG_FIELD(data.gpu_resident, any(), "GPU training: keep the training images on the GPU and build batches there"),
  };
}

std::vector<Field> optim_fields() {
  return {
      CG_FIELD(optim.name, any(), "optimizer"),
      CG_FIELD(optim.lr, at_least(0), "peak learning rate"),
      CG_FIELD(optim.momentum, between(0, 1), "SGD momentum"),
      CG_FIELD(optim.nesterov, any(), "SGD Nesterov momentum"),
      CG_FIELD(optim.weight_decay, at_least(0), "L2 (SGD) or decoupled (AdamW) weight decay"),
      CG_FIELD(optim.beta1, below_one(), "AdamW beta1, in [0, 1)"),
      CG_FIELD(optim.beta2, below_one(), "AdamW beta2, in [0, 1)"),
      CG_FIELD(optim.eps, at_least(0), "AdamW epsilon"),
      CG_FIELD(optim.zero_sharding, any(), "the older name of dist.sharding=optimizer (ZeRO-1); true sets that"),
  };
}

std::vector<Field> sched_fields() {
  return {
      CG_FIELD(sched.name, any(), "constant, cosine over epochs, or linear warm-up then cosine per step"),
      CG_FIELD(sched.warmup_steps, between(0, kMaxSteps), "warm-up optimizer steps (warmup_cosine only)"),
      CG_FIELD(sched.min_lr, at_least(0), "learning rate at the end of the cosine"),
  };
}

std::vector<Field> train_fields() {
  return {
      CG_FIELD(train.epochs, between(1, kMaxEpochs), "passes over the training set"),
      CG_FIELD(train.max_steps, between(0, kMaxSteps), "stop after this many optimizer steps (0 = no limit)"),
      CG_FIELD(train.grad_accum_steps, between(1, 4096), "micro-batches per optimizer step"),
      CG_FIELD(train.seed, at_least(0), "seed for init, shuffling and augmentation"),
      CG_FIELD(train.log_interval, between(1, kMaxSteps), "optimizer steps between metric lines"),
      CG_FIELD(train.device, any(), "where to train (auto = CUDA when available)"),
      CG_FIELD(train.threads, between(0, 1024), "CPU compute threads (0 = all cores)"),
      CG_FIELD(train.eval_batch_size, between(1, kMaxBatch), "batch size for evaluation"),
      CG_FIELD(train.target_accuracy, between(0, 1), "stop once test accuracy reaches it (0 = off); logs the time"),
      CG_FIELD(train.cuda_graph, any(),
               "GPU: capture the whole training step once as a CUDA graph and replay it; auto does wherever the "
               "run allows (not with gloo, accumulation, profiling or a sharded dist.sharding; says why at start), "
               "true insists"),
  };
}

std::vector<Field> amp_fields() {
  return {
      CG_FIELD(amp.enabled, any(), "mixed precision (needs CUDA)"),
      CG_FIELD(amp.dtype, any(), "half type for mixed precision"),
  };
}

std::vector<Field> kernels_fields() {
  return {
      CG_FIELD(kernels.conv, any(),
               "GPU convolution: cudnn, native (implicit GEMM) or auto (per layer the faster of the two, timed "
               "once per shape; cudnn under cudnn_algo_search=heuristic)"),
      CG_FIELD(kernels.batch_norm, any(), "GPU batch norm: cudnn, native or auto (native)"),
      CG_FIELD(kernels.cudnn_algo_search, any(),
               "cuDNN algorithms (and conv=auto's choice): timed once per shape (the 3 fastest again, median "
               "of 5), or heuristic"),
      CG_FIELD(kernels.cudnn_deterministic, any(),
               "cuDNN convolutions only by algorithms that give the same bits run to run (false also admits "
               "the atomics-based backward ones)"),
      CG_FIELD(kernels.cpu_conv, any(),
               "CPU convolution: winograd (F(4x4,3x3) for 3x3 stride-1 float32 layers of 32+ channels or of "
               "channels in groups of 16), winograd2 (F(2x2,3x3) for every 3x3 stride-1 float32 layer), direct "
               "(float32 3x3 and 1x1 layers of stride 1 or 2 without im2col), im2col (im2col + GEMM, every layer) "
               "or auto (per layer and phase, the fastest of direct, im2col and winograd2 where winograd2 is as "
               "exact); direct, im2col, winograd2 and auto are as exact as PyTorch float32 on every layer of 16+ "
               "channels (error against float64 at most PyTorch's; auto's worst phase 1.04x), winograd is faster "
               "on wide layers but 4-8x PyTorch's error in forward and backward-data (bench/conv_fidelity.sh), so "
               "auto never picks it"),
  };
}

std::vector<Field> checkpoint_fields() {
  return {
      CG_FIELD(checkpoint.dir, any(), "checkpoint folder (\"\" = <output.dir>/checkpoints)"),
      CG_FIELD(checkpoint.save_every, between(0, kMaxEpochs), "epochs between checkpoints (0 = only at the end)"),
      CG_FIELD(checkpoint.resume_from, any(),
               "checkpoint to resume from: a .safetensors file or a .shards folder, from any world size and "
               "dist.sharding (\"\" = none)"),
      CG_FIELD(checkpoint.format, any(),
               "full (one <name>.safetensors that rank 0 writes, the state gathered to it; PyTorch loads it) or "
               "sharded (a <name>.shards folder: every rank writes its own pieces, rank 0 an index.json last; "
               "nothing is gathered), as FSDP's FULL_STATE_DICT and SHARDED_STATE_DICT"),
  };
}

std::vector<Field> dist_fields() {
  return {
      CG_FIELD(dist.backend, any(),
               "gradient transport: auto (NCCL when every rank on a node has a GPU of its own, else Gloo, staged "
               "through pinned memory for GPU tensors), nccl, gloo, or modeled (one rank times a modeled ring)"),
      // 4 MB rather than PyTorch's 25: MiniResNet's 11 MB of gradients then make 4 buckets, so
      // all-reduce overlaps backward; 25 MB would make 2. To be re-measured on the GPU.
      CG_FIELD(dist.bucket_cap_mb, positive_at_most(kMaxBucketMb), "gradient bucket size in MB (> 0)"),
      CG_FIELD(dist.timeout_s, between(1, kMaxTimeoutS), "longest wait in seconds for a peer or a collective"),
      CG_FIELD(dist.modeled_world_size, between(2, 65536),
               "dist.backend=modeled: ranks in the modeled ring (hybrid_shard: nodes of 8 on NVLink, so 16, 24, ...)"),
      CG_FIELD(dist.modeled_link, any(), "dist.backend=modeled: nvlink (one node) or infiniband (200 Gb/s per GPU)"),
      CG_FIELD(dist.grad_compression, any(),
               "gradient buckets all-reduced in 16 bits, as PyTorch's fp16_compress_hook / bf16_compress_hook but "
               "divided by the world size before the cast (the stock hook casts first, so fp16 overflows sooner): none, "
               "fp16 (half the bytes; 11-bit precision, averaged shares to 65504) or bf16 (half the bytes; 8-bit "
               "precision)"),
      CG_FIELD(dist.sharding, any(),
               "what each data-parallel rank keeps, as PyTorch FSDP's ShardingStrategy: no_shard (DDP: everything, "
               "gradients all-reduced), optimizer (ZeRO-1: optimizer state 1/world; gradients reduce-scattered, "
               "parameters all-gathered after the step), shard_grad_op (ZeRO-2: gradients too are 1/world between "
               "steps), full_shard (ZeRO-3: parameters too, gathered per residual block before its forward and "
               "backward), hybrid_shard (full_shard within each node, the shards all-reduced across nodes: node size from "
               "the launcher's local world size)"),
      CG_FIELD(dist.param_dtype, any(),
               "full_shard and hybrid_shard: the type parameters are all-gathered in, as PyTorch FSDP's "
               "MixedPrecision param_dtype: float32, or fp16 / bf16 (half the bytes; the forward and backward see "
               "the float32 masters rounded to it, which stay float32 with their gradients and optimizer state)"),
  };
}

std::vector<Field> output_fields() {
  return {
      CG_FIELD(output.dir, any(), "where config.yaml, metrics.jsonl and checkpoints go"),
  };
}

std::vector<Field> profile_fields() {
  return {
      CG_FIELD(profile.enabled, any(), "write a Chrome-trace timeline"),
  };
}

// Every key, section by section.
const std::vector<Field>& fields() {
  using Section = std::vector<Field> (*)();
  static const std::vector<Field> table = [] {
    const Section sections[] = {model_fields,   data_fields,       optim_fields, sched_fields,  train_fields, amp_fields,
                                kernels_fields, checkpoint_fields, dist_fields,  output_fields, profile_fields};
    std::vector<Field> all;
    for (const Section section : sections) {
      std::vector<Field> keys = section();
      all.insert(all.end(), std::make_move_iterator(keys.begin()), std::make_move_iterator(keys.end()));
    }
    return all;
  }();
  return table;
}
#undef CG_FIELD

const config::Schema& schema() {
  static const config::Schema s = [] {
    config::Schema built;
    for (const Field& f : fields()) built.add(f.spec);
    return built;
  }();
  return s;
}

// Which key set the sharding strategy: the one an error about it names.
const char* sharding_key(const config::Values& v) {
  return v.origin("optim.zero_sharding") != "default" && v.boolean("optim.zero_sharding") ? "optim.zero_sharding"
                                                                                           : "dist.sharding";
}

// train.cuda_graph=true where the step cannot be captured.
void check_cuda_graph(const TrainConfig& c, const config::Values& v) {
  if (c.train.cuda_graph != CudaGraphMode::on) return;
  std::string why = cuda_graph_refusal(c);
  if (why.empty()) return;
  if (why.find("dist.sharding") != std::string::npos && std::string(sharding_key(v)) == "optim.zero_sharding")
    why += " (optim.zero_sharding=true is its older name)";
  config::reject(v, "train.cuda_graph", why + "; set train.cuda_graph to auto (captures where it can) or false");
}

// optim.zero_sharding=true is the older spelling of dist.sharding=optimizer: read into it, so that
// the resolved config (--print-config, config.yaml, the ranks' comparison) carries the new key
// only. Returns the note saying so. Also refuses the strategies not built yet.
std::vector<std::string> resolve_sharding_alias(TrainConfig& c, const config::Values& v) {
  std::vector<std::string> notes;
  if (c.optim.zero_sharding) {
    c.optim.zero_sharding = false;
    if (v.origin("dist.sharding") != "default" && c.dist.sharding != dist::Sharding::optimizer)
      config::reject(v, "optim.zero_sharding",
                     fmt::format("true is the older name of dist.sharding=optimizer, and dist.sharding={} ({}) asks "
                                 "for another strategy; keep dist.sharding only",
                                 enum_name(c.dist.sharding), v.origin("dist.sharding")));
    c.dist.sharding = dist::Sharding::optimizer;
    notes.push_back(fmt::format("config key 'optim.zero_sharding' ({}) is the older name of dist.sharding=optimizer "
                                "(ZeRO-1), which it sets; write dist.sharding=optimizer",
                                v.origin("optim.zero_sharding")));
  }
  // The modeled ring's hybrid_shard is whole NVLink nodes joined by InfiniBand.
  const int64_t node_gpus = dist::kNvlinkNodeGpus;
  if (c.dist.sharding == dist::Sharding::hybrid_shard && c.dist.backend == dist::BackendRequest::modeled &&
      (c.dist.modeled_world_size % node_gpus != 0 || c.dist.modeled_world_size < 2 * node_gpus))
    config::reject(v, "dist.sharding",
                   fmt::format("hybrid_shard on dist.backend=modeled models nodes of {} GPUs, and "
                               "dist.modeled_world_size={} ({}) is not two or more of them; use 16, 24, 32, ...",
                               node_gpus, c.dist.modeled_world_size, v.origin("dist.modeled_world_size")));
  if (c.dist.sharding == dist::Sharding::hybrid_shard && c.dist.grad_compression != dist::GradCompression::none)
    config::reject(v, "dist.sharding",
                   fmt::format("hybrid_shard reduces gradients in float32 (16-bit compression is not built for its "
                               "two levels), and dist.grad_compression={} ({}); use full_shard, or no compression",
                               enum_name(c.dist.grad_compression), v.origin("dist.grad_compression")));
  if (c.dist.param_dtype != dist::ParamDType::float32 && !gathers_parameters(c.dist.sharding))
    config::reject(v, "dist.param_dtype",
                   fmt::format("{} is the type full_shard and hybrid_shard gather parameters in, and dist.sharding={} "
                               "({}) never gathers them before a forward",
                               enum_name(c.dist.param_dtype), enum_name(c.dist.sharding), v.origin("dist.sharding")));
  return notes;
}

// What the gradient transport the config names cannot do. dist.backend=gloo with CUDA tensors is
// always Gloo staged through pinned host memory, which has no 16-bit collectives. (With
// dist.backend=auto, staging depends on the run, ranks sharing a GPU, so DDP refuses it then,
// naming the same key.)
void check_transport(const TrainConfig& c, const config::Values& v) {
  if (c.dist.backend != dist::BackendRequest::gloo || c.train.device != DeviceName::cuda) return;
  if (c.dist.grad_compression != dist::GradCompression::none)
    config::reject(v, "dist.grad_compression",
                   fmt::format("dist.backend=gloo with train.device=cuda ({}, {}) stages gradients through host "
                               "memory, which has no 16-bit all-reduce; use dist.backend=nccl (or auto) or set it to "
                               "none",
                               v.origin("dist.backend"), v.origin("train.device")));
}

// The model as a whole, counted from its shapes before anything is built: each key in bounds, the
// widths, blocks and classes can still multiply to a model no process could hold.
void check_model_size(const TrainConfig& c, const config::Values& v) {
  const double parameters = nn::parameter_count(model_options(c));
  if (parameters <= kMaxParameters) return;
  // Against model.widths: with the default widths, no blocks and classes in bounds reach the limit.
  config::reject(v, "model.widths",
                 fmt::format("model.widths ({}), model.blocks ({}) and model.num_classes ({}) make a model of {:.4g} "
                             "parameters ({:.4g} GiB of float32 weights), over the limit of {} parameters (4 GiB; "
                             "training holds about 4 times the weights); use fewer blocks or narrower stages",
                             v.origin("model.widths"), v.origin("model.blocks"), v.origin("model.num_classes"),
                             parameters, parameters * 4 / double(1 << 30), kMaxParameters));
}

// What train.device=cpu rules out.
void check_cpu_device(const TrainConfig& c, const config::Values& v) {
  if (c.train.device != DeviceName::cpu) return;
  if (c.amp.enabled)
    config::reject(v, "amp.enabled", "mixed precision needs train.device=cuda (or auto); the CPU trains in float32");
  if (c.data.gpu_resident)
    config::reject(v, "data.gpu_resident", "keeps the training set on the GPU; it needs train.device=cuda (or auto)");
  if (c.dist.backend == dist::BackendRequest::nccl)
    config::reject(v, "dist.backend", "nccl needs GPUs; with train.device=cpu use gloo or auto");
}

// Rules that involve several keys, reported against the key most likely to be the mistake.
void check_consistency(const TrainConfig& c, const config::Values& v) {
  if (c.model.widths.size() != c.model.blocks.size())  // the message places both keys
    config::reject(v, "model.widths",
                   fmt::format("has {} stages but model.blocks ({}) has {}; give one block count per width",
                               c.model.widths.size(), v.origin("model.blocks"), c.model.blocks.size()));
  check_model_size(c, v);
  if (c.sched.min_lr > c.optim.lr && c.sched.name != nn::ScheduleKind::constant)
    config::reject(v, "sched.min_lr", fmt::format("{} is larger than optim.lr ({})", c.sched.min_lr, c.optim.lr));
  if (c.optim.nesterov && c.optim.name == OptimizerName::sgd && c.optim.momentum <= 0)
    config::reject(v, "optim.nesterov", "needs optim.momentum > 0");
  check_cpu_device(c, v);
  // Every rank reads at least one full batch per epoch of at most data.synthetic_size images.
  if (c.data.dataset == data::DatasetKind::synthetic && c.data.batch_size > c.data.synthetic_size)
    config::reject(v, "data.batch_size",
                   fmt::format("{} is larger than data.synthetic_size ({}, {}): not one batch per epoch",
                               c.data.batch_size, c.data.synthetic_size, v.origin("data.synthetic_size")));
  if (c.model.sync_batchnorm && c.kernels.batch_norm == ops::GpuImpl::cudnn && c.train.device != DeviceName::cpu)
    config::reject(v, "model.sync_batchnorm",
                   fmt::format("needs the batch-norm statistics outside cuDNN, and kernels.batch_norm=cudnn ({}) "
                               "keeps them inside; use kernels.batch_norm=native (or auto)",
                               v.origin("kernels.batch_norm")));
  check_transport(c, v);
  check_cuda_graph(c, v);
}

// Keys that only one variant reads (one schedule, optimizer, dataset, ...). Set to a non-default
// value while another variant is chosen, such a key does nothing: that earns a warning, not an
// error, so that switching sched.name=constant on the command line needs no other change.
struct VariantKey {
  const char* key;
  const char* variant_key;  // the key that picks the variant
  const char* used_by;      // which variants read `key`
  bool (*in_use)(const TrainConfig&);
};
const VariantKey kVariantKeys[] = {
    {"sched.warmup_steps", "sched.name", "warmup_cosine",
     [](const TrainConfig& c) { return c.sched.name == nn::ScheduleKind::warmup_cosine; }},
    {"sched.min_lr", "sched.name", "cosine and warmup_cosine",
     [](const TrainConfig& c) { return c.sched.name != nn::ScheduleKind::constant; }},
    {"optim.momentum", "optim.name", "sgd", [](const TrainConfig& c) { return c.optim.name == OptimizerName::sgd; }},
    {"optim.nesterov", "optim.name", "sgd", [](const TrainConfig& c) { return c.optim.name == OptimizerName::sgd; }},
    {"optim.beta1", "optim.name", "adamw", [](const TrainConfig& c) { return c.optim.name == OptimizerName::adamw; }},
    {"optim.beta2", "optim.name", "adamw", [](const TrainConfig& c) { return c.optim.name == OptimizerName::adamw; }},
    {"optim.eps", "optim.name", "adamw", [](const TrainConfig& c) { return c.optim.name == OptimizerName::adamw; }},
    {"data.synthetic_size", "data.dataset", "synthetic",
     [](const TrainConfig& c) { return c.data.dataset == data::DatasetKind::synthetic; }},
    {"dist.modeled_world_size", "dist.backend", "modeled",
     [](const TrainConfig& c) { return c.dist.backend == dist::BackendRequest::modeled; }},
    {"dist.modeled_link", "dist.backend", "modeled",
     [](const TrainConfig& c) { return c.dist.backend == dist::BackendRequest::modeled; }},
};

std::vector<std::string> unused_variant_keys(const TrainConfig& c, const config::Values& v) {
  std::vector<std::string> notes;
  for (const VariantKey& k : kVariantKeys) {
    if (k.in_use(c) || v.origin(k.key) == "default" || v.at(k.key) == schema().find(k.key)->default_value) continue;
    notes.push_back(fmt::format("config key '{}' ({}) has no effect: only {}={} uses it, and {} is {} ({})", k.key,
                                v.origin(k.key), k.variant_key, k.used_by, k.variant_key,
                                config::to_text(v.at(k.variant_key)), v.origin(k.variant_key)));
  }
  return notes;
}

}  // namespace

TrainConfig load_train_config(const std::string& yaml_path, const std::vector<std::string>& overrides,
                              std::vector<std::string>* warnings) {
  const config::Values v = config::load(schema(), yaml_path, overrides);
  TrainConfig c;
  for (const Field& f : fields()) f.read(c, v.at(f.spec.name));
  // Resolved here, so that every reader (and --print-config, and the saved config.yaml) sees the
  // number the model is built with.
  if (c.model.in_channels == 0) c.model.in_channels = data::native_channels(c.data.dataset);
  std::vector<std::string> notes = resolve_sharding_alias(c, v);
  check_consistency(c, v);
  for (std::string& n : unused_variant_keys(c, v)) notes.push_back(std::move(n));
  if (warnings) *warnings = notes;
  else if (log::is_main_process())  // once per job, not once per rank
    for (const std::string& n : notes) log::warn("{}", n);
  return c;
}

std::string cuda_graph_refusal(const TrainConfig& c) {
  if (c.train.device == DeviceName::cpu) return "CUDA graphs need a GPU, and train.device=cpu";
  if (c.dist.backend == dist::BackendRequest::gloo)
    return "dist.backend=gloo's all-reduce is host code, which a graph cannot capture";
  if (c.train.grad_accum_steps > 1)
    return fmt::format("a graph captures one micro-batch per optimizer step, and train.grad_accum_steps={}",
                       c.train.grad_accum_steps);
  if (c.profile.enabled) return "a replayed step has no host-side phases to profile, and profile.enabled=true";
  if (dist::shards_optimizer(c.dist.sharding))
    return fmt::format("dist.sharding={} switches collectives after the first step (the shards are fixed then)",
                       enum_name(c.dist.sharding));
  return "";
}

std::string to_yaml(const TrainConfig& c) {
  config::Values v;
  for (const Field& f : fields()) v.values[f.spec.name] = f.write(c);
  return config::to_yaml(schema(), v);
}

std::string train_config_help() { return config::help(schema()); }
std::string train_config_reference() { return config::markdown_reference(schema()); }

}  // namespace cg::train
