#include "apps/common/train_config.h"

#include "util/check.h"
#include "util/config.h"

namespace cg::apps {
namespace {

using config::Kind;
using config::KeySpec;

KeySpec key(std::string name, Kind kind, config::Value def, std::string help,
            std::optional<double> min = std::nullopt, std::optional<double> max = std::nullopt) {
  KeySpec k;
  k.name = std::move(name);
  k.kind = kind;
  k.default_value = std::move(def);
  k.help = std::move(help);
  k.min = min;
  k.max = max;
  return k;
}

KeySpec choice(std::string name, std::vector<std::string> choices, std::string help) {
  KeySpec k = key(std::move(name), Kind::choice, choices.front(), std::move(help));
  k.choices = std::move(choices);
  return k;
}

const config::Schema& schema() {
  static const config::Schema s = [] {
    config::Schema s;
    using V = std::vector<int64_t>;
    // Defaults follow the seed article's TrainingConfig where it has the key.
    s.add(key("model.widths", Kind::int_list, V{64, 128, 256}, "channels of each stage", 1));
    s.add(key("model.blocks", Kind::int_list, V{2, 2, 2}, "BasicBlocks per stage", 1));
    s.add(key("model.in_channels", Kind::integer, int64_t(3), "image channels (1 for Fashion-MNIST)", 1));
    s.add(key("model.num_classes", Kind::integer, int64_t(10), "output classes", 2));
    s.add(key("model.init_from", Kind::string, std::string(), "safetensors weights to start from (\"\" = random init)"));
    s.add(choice("data.dataset", {"fashion_mnist", "cifar10", "synthetic"}, "which dataset"));
    s.add(key("data.path", Kind::string, std::string(), "dataset folder (\"\" = the dataset's default)"));
    s.add(key("data.image_size", Kind::integer, int64_t(0), "image side; 0 = native, larger pads", 0, 4096));
    s.add(key("data.batch_size", Kind::integer, int64_t(64), "images per step per rank", 1));
    s.add(key("data.num_workers", Kind::integer, int64_t(4), "loader threads (0 = load inline)", 0, 256));
    s.add(key("data.shuffle", Kind::boolean, true, "reshuffle every epoch (seed + epoch)"));
    s.add(key("data.augment", Kind::boolean, true, "random crop (padding 4) and horizontal flip"));
    s.add(key("data.synthetic_size", Kind::integer, int64_t(50000), "images in the synthetic train split", 1));
    s.add(choice("optim.name", {"sgd", "adamw"}, "optimizer"));
    s.add(key("optim.lr", Kind::real, 0.01, "peak learning rate", 0.0));
    s.add(key("optim.momentum", Kind::real, 0.9, "SGD momentum", 0.0, 1.0));
    s.add(key("optim.nesterov", Kind::boolean, false, "SGD Nesterov momentum"));
    s.add(key("optim.weight_decay", Kind::real, 1e-4, "L2 (SGD) or decoupled (AdamW) weight decay", 0.0));
    s.add(key("optim.beta1", Kind::real, 0.9, "AdamW beta1", 0.0, 0.999999));
    s.add(key("optim.beta2", Kind::real, 0.999, "AdamW beta2", 0.0, 0.999999));
    s.add(key("optim.eps", Kind::real, 1e-8, "AdamW epsilon", 0.0));
    s.add(choice("sched.name", {"cosine", "constant", "warmup_cosine"},
                 "cosine over epochs, constant, or linear warm-up then cosine per step"));
    s.add(key("sched.warmup_steps", Kind::integer, int64_t(0), "warm-up steps (warmup_cosine)", 0));
    s.add(key("sched.min_lr", Kind::real, 0.0, "learning rate at the end of the cosine", 0.0));
    s.add(key("train.epochs", Kind::integer, int64_t(10), "passes over the training set", 1));
    s.add(key("train.max_steps", Kind::integer, int64_t(0), "stop after this many optimizer steps (0 = no cap)", 0));
    s.add(key("train.grad_accum_steps", Kind::integer, int64_t(1), "micro-batches per optimizer step", 1, 4096));
    s.add(key("train.seed", Kind::integer, int64_t(42), "seed for init, shuffling and augmentation", 0));
    s.add(key("train.log_interval", Kind::integer, int64_t(10), "optimizer steps between metric lines", 1));
    s.add(choice("train.device", {"auto", "cpu", "cuda"}, "where to train"));
    s.add(key("train.threads", Kind::integer, int64_t(0), "CPU compute threads (0 = all cores)", 0, 1024));
    s.add(key("train.eval_batch_size", Kind::integer, int64_t(256), "batch size for evaluation", 1));
    s.add(key("amp.enabled", Kind::boolean, false, "mixed precision (needs CUDA)"));
    s.add(choice("amp.dtype", {"fp16", "bf16"}, "half type for mixed precision"));
    s.add(key("checkpoint.dir", Kind::string, std::string(), "checkpoint folder (\"\" = <output.dir>/checkpoints)"));
    s.add(key("checkpoint.save_every", Kind::integer, int64_t(1), "epochs between checkpoints (0 = only at the end)", 0));
    s.add(key("checkpoint.resume_from", Kind::string, std::string(), "checkpoint to resume from (\"\" = none)"));
    s.add(choice("dist.backend", {"auto", "nccl", "gloo"}, "collective backend (auto: nccl on GPU, gloo on CPU)"));
    // 4 MB: MiniResNet's 11 MB of gradients make 4 buckets (1 MB first), enough to overlap;
    // PyTorch's 25 MB would make 2. To be re-measured on the GPU (issues 4 and 5).
    s.add(key("dist.bucket_cap_mb", Kind::real, 4.0, "gradient bucket size in MB", 0.001));
    s.add(key("dist.timeout_s", Kind::real, 120.0, "longest wait for a peer or a collective before failing", 1.0));
    s.add(key("output.dir", Kind::string, std::string("runs/latest"), "where config.yaml, metrics.jsonl and checkpoints go"));
    s.add(key("profile.enabled", Kind::boolean, false, "write a Chrome-trace timeline"));
    return s;
  }();
  return s;
}

// Rules that involve several keys; reported like single-key errors.
void validate(const TrainConfig& c, const config::Values& v) {
  auto fail = [&](const std::string& k, const std::string& what) {
    throw UsageError(fmt::format("config key '{}' ({}): {}", k, v.origin(k), what));
  };
  if (c.model.widths.size() != c.model.blocks.size())
    fail("model.blocks", fmt::format("has {} stages but model.widths has {}", c.model.blocks.size(),
                                     c.model.widths.size()));
  if (c.sched.warmup_steps > 0 && c.sched.name != ScheduleName::warmup_cosine)
    fail("sched.warmup_steps", "is only used by sched.name=warmup_cosine");
  if (c.sched.min_lr > c.optim.lr) fail("sched.min_lr", "is larger than optim.lr");
  if (c.optim.nesterov && (c.optim.name != OptimizerName::sgd || c.optim.momentum <= 0))
    fail("optim.nesterov", "needs optim.name=sgd and optim.momentum > 0");
}

// How each key maps to a TrainConfig field, both ways: one table serves loading and to_yaml.
template <typename E>
using EnumNames = std::vector<std::pair<E, const char*>>;  // by value: an initializer_list would dangle
template <typename E> EnumNames<E> names_of();
template <> EnumNames<DatasetName> names_of() {
  return {{DatasetName::fashion_mnist, "fashion_mnist"}, {DatasetName::cifar10, "cifar10"}, {DatasetName::synthetic, "synthetic"}};
}
template <> EnumNames<OptimizerName> names_of() { return {{OptimizerName::sgd, "sgd"}, {OptimizerName::adamw, "adamw"}}; }
template <> EnumNames<ScheduleName> names_of() {
  return {{ScheduleName::constant, "constant"}, {ScheduleName::cosine, "cosine"}, {ScheduleName::warmup_cosine, "warmup_cosine"}};
}
template <> EnumNames<DeviceName> names_of() {
  return {{DeviceName::auto_select, "auto"}, {DeviceName::cpu, "cpu"}, {DeviceName::cuda, "cuda"}};
}
template <> EnumNames<AmpDtype> names_of() { return {{AmpDtype::fp16, "fp16"}, {AmpDtype::bf16, "bf16"}}; }
template <> EnumNames<DistBackend> names_of() {
  return {{DistBackend::auto_select, "auto"}, {DistBackend::nccl, "nccl"}, {DistBackend::gloo, "gloo"}};
}

template <typename T>
void assign(T& field, const config::Value& v) {
  if constexpr (std::is_enum_v<T>) {
    const std::string& name = std::get<std::string>(v);
    for (const auto& [e, n] : names_of<T>())
      if (name == n) field = e;
  } else {
    field = std::get<T>(v);
  }
}

template <typename T>
config::Value value_of(const T& field) {
  if constexpr (std::is_enum_v<T>) {
    for (const auto& [e, n] : names_of<T>())
      if (e == field) return std::string(n);
    CG_FAIL("enum value without a name");
  } else {
    return field;
  }
}

struct Binding {
  const char* key;
  void (*read)(TrainConfig&, const config::Value&);
  config::Value (*write)(const TrainConfig&);
};

#define CG_BIND(key, member)                                                          \
  Binding {                                                                           \
    key, [](TrainConfig& c, const config::Value& v) { assign(c.member, v); },         \
        [](const TrainConfig& c) { return value_of(c.member); }                       \
  }

const std::vector<Binding>& bindings() {
  static const std::vector<Binding> b{
      CG_BIND("model.widths", model.widths), CG_BIND("model.blocks", model.blocks),
      CG_BIND("model.in_channels", model.in_channels), CG_BIND("model.num_classes", model.num_classes),
      CG_BIND("model.init_from", model.init_from), CG_BIND("data.dataset", data.dataset),
      CG_BIND("data.path", data.path), CG_BIND("data.image_size", data.image_size),
      CG_BIND("data.batch_size", data.batch_size), CG_BIND("data.num_workers", data.num_workers),
      CG_BIND("data.shuffle", data.shuffle), CG_BIND("data.augment", data.augment),
      CG_BIND("data.synthetic_size", data.synthetic_size), CG_BIND("optim.name", optim.name),
      CG_BIND("optim.lr", optim.lr), CG_BIND("optim.momentum", optim.momentum),
      CG_BIND("optim.nesterov", optim.nesterov), CG_BIND("optim.weight_decay", optim.weight_decay),
      CG_BIND("optim.beta1", optim.beta1), CG_BIND("optim.beta2", optim.beta2),
      CG_BIND("optim.eps", optim.eps), CG_BIND("sched.name", sched.name),
      CG_BIND("sched.warmup_steps", sched.warmup_steps), CG_BIND("sched.min_lr", sched.min_lr),
      CG_BIND("train.epochs", train.epochs), CG_BIND("train.max_steps", train.max_steps),
      CG_BIND("train.grad_accum_steps", train.grad_accum_steps), CG_BIND("train.seed", train.seed),
      CG_BIND("train.log_interval", train.log_interval), CG_BIND("train.device", train.device),
      CG_BIND("train.threads", train.threads), CG_BIND("train.eval_batch_size", train.eval_batch_size),
      CG_BIND("amp.enabled", amp.enabled), CG_BIND("amp.dtype", amp.dtype),
      CG_BIND("checkpoint.dir", checkpoint.dir), CG_BIND("checkpoint.save_every", checkpoint.save_every),
      CG_BIND("checkpoint.resume_from", checkpoint.resume_from), CG_BIND("dist.backend", dist.backend),
      CG_BIND("dist.bucket_cap_mb", dist.bucket_cap_mb), CG_BIND("dist.timeout_s", dist.timeout_s),
      CG_BIND("output.dir", output.dir),
      CG_BIND("profile.enabled", profile.enabled)};
  return b;
}
#undef CG_BIND

}  // namespace

TrainConfig load_train_config(const std::string& yaml_path, const std::vector<std::string>& overrides) {
  const config::Values v = config::load(schema(), yaml_path, overrides);
  TrainConfig c{};
  CG_CHECK(bindings().size() == schema().keys().size(), "every config key needs a binding");
  for (const Binding& b : bindings()) b.read(c, v.at(b.key));
  validate(c, v);
  return c;
}

std::string to_yaml(const TrainConfig& c) {
  config::Values v;
  for (const Binding& b : bindings()) v.values[b.key] = b.write(c);
  return config::to_yaml(schema(), v);
}

std::string train_config_help() { return config::help(schema()); }

}  // namespace cg::apps
