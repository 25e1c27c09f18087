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
    s.add(key("dist.bucket_cap_mb", Kind::real, 25.0, "gradient bucket size in MB", 0.001));
    s.add(key("output.dir", Kind::string, std::string("runs/latest"), "where config.yaml, metrics.jsonl and checkpoints go"));
    s.add(key("profile.enabled", Kind::boolean, false, "write a Chrome-trace timeline"));
    return s;
  }();
  return s;
}

template <typename E>
E pick(const std::string& value, std::initializer_list<std::pair<const char*, E>> table) {
  for (const auto& [name, e] : table)
    if (value == name) return e;
  CG_FAIL("unmapped choice '{}'", value);
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

}  // namespace

TrainConfig load_train_config(const std::string& yaml_path, const std::vector<std::string>& overrides) {
  const config::Values v = config::load(schema(), yaml_path, overrides);
  TrainConfig c;
  c.model.widths = v.int_list("model.widths");
  c.model.blocks = v.int_list("model.blocks");
  c.model.in_channels = v.integer("model.in_channels");
  c.model.num_classes = v.integer("model.num_classes");
  c.model.init_from = v.string("model.init_from");
  c.data.dataset = pick<DatasetName>(v.string("data.dataset"), {{"fashion_mnist", DatasetName::fashion_mnist},
                                                                {"cifar10", DatasetName::cifar10},
                                                                {"synthetic", DatasetName::synthetic}});
  c.data.path = v.string("data.path");
  c.data.image_size = v.integer("data.image_size");
  c.data.batch_size = v.integer("data.batch_size");
  c.data.num_workers = v.integer("data.num_workers");
  c.data.synthetic_size = v.integer("data.synthetic_size");
  c.data.shuffle = v.boolean("data.shuffle");
  c.data.augment = v.boolean("data.augment");
  c.optim.name = pick<OptimizerName>(v.string("optim.name"), {{"sgd", OptimizerName::sgd}, {"adamw", OptimizerName::adamw}});
  c.optim.lr = v.real("optim.lr");
  c.optim.momentum = v.real("optim.momentum");
  c.optim.nesterov = v.boolean("optim.nesterov");
  c.optim.weight_decay = v.real("optim.weight_decay");
  c.optim.beta1 = v.real("optim.beta1");
  c.optim.beta2 = v.real("optim.beta2");
  c.optim.eps = v.real("optim.eps");
  c.sched.name = pick<ScheduleName>(v.string("sched.name"), {{"constant", ScheduleName::constant},
                                                             {"cosine", ScheduleName::cosine},
                                                             {"warmup_cosine", ScheduleName::warmup_cosine}});
  c.sched.warmup_steps = v.integer("sched.warmup_steps");
  c.sched.min_lr = v.real("sched.min_lr");
  c.train.epochs = v.integer("train.epochs");
  c.train.max_steps = v.integer("train.max_steps");
  c.train.grad_accum_steps = v.integer("train.grad_accum_steps");
  c.train.seed = v.integer("train.seed");
  c.train.log_interval = v.integer("train.log_interval");
  c.train.device = pick<DeviceName>(v.string("train.device"), {{"auto", DeviceName::auto_select},
                                                               {"cpu", DeviceName::cpu},
                                                               {"cuda", DeviceName::cuda}});
  c.train.threads = v.integer("train.threads");
  c.train.eval_batch_size = v.integer("train.eval_batch_size");
  c.amp.enabled = v.boolean("amp.enabled");
  c.amp.dtype = pick<AmpDtype>(v.string("amp.dtype"), {{"fp16", AmpDtype::fp16}, {"bf16", AmpDtype::bf16}});
  c.checkpoint.dir = v.string("checkpoint.dir");
  c.checkpoint.save_every = v.integer("checkpoint.save_every");
  c.checkpoint.resume_from = v.string("checkpoint.resume_from");
  c.dist.backend = pick<DistBackend>(v.string("dist.backend"), {{"auto", DistBackend::auto_select},
                                                                {"nccl", DistBackend::nccl},
                                                                {"gloo", DistBackend::gloo}});
  c.dist.bucket_cap_mb = v.real("dist.bucket_cap_mb");
  c.output.dir = v.string("output.dir");
  c.profile.enabled = v.boolean("profile.enabled");
  validate(c, v);
  return c;
}

std::string to_yaml(const TrainConfig& c) {
  // Render through the schema, so every key appears with the schema's spelling and order.
  config::Values v;
  auto name_of = [](auto e, std::initializer_list<std::pair<decltype(e), const char*>> table) {
    for (const auto& [x, n] : table)
      if (x == e) return std::string(n);
    return std::string("?");
  };
  v.values["model.widths"] = c.model.widths;
  v.values["model.blocks"] = c.model.blocks;
  v.values["model.in_channels"] = c.model.in_channels;
  v.values["model.num_classes"] = c.model.num_classes;
  v.values["model.init_from"] = c.model.init_from;
  v.values["data.dataset"] = name_of(c.data.dataset, {{DatasetName::fashion_mnist, "fashion_mnist"},
                                                       {DatasetName::cifar10, "cifar10"},
                                                       {DatasetName::synthetic, "synthetic"}});
  v.values["data.path"] = c.data.path;
  v.values["data.image_size"] = c.data.image_size;
  v.values["data.batch_size"] = c.data.batch_size;
  v.values["data.num_workers"] = c.data.num_workers;
  v.values["data.shuffle"] = c.data.shuffle;
  v.values["data.augment"] = c.data.augment;
  v.values["data.synthetic_size"] = c.data.synthetic_size;
  v.values["optim.name"] = name_of(c.optim.name, {{OptimizerName::sgd, "sgd"}, {OptimizerName::adamw, "adamw"}});
  v.values["optim.lr"] = c.optim.lr;
  v.values["optim.momentum"] = c.optim.momentum;
  v.values["optim.nesterov"] = c.optim.nesterov;
  v.values["optim.weight_decay"] = c.optim.weight_decay;
  v.values["optim.beta1"] = c.optim.beta1;
  v.values["optim.beta2"] = c.optim.beta2;
  v.values["optim.eps"] = c.optim.eps;
  v.values["sched.name"] = name_of(c.sched.name, {{ScheduleName::constant, "constant"},
                                                   {ScheduleName::cosine, "cosine"},
                                                   {ScheduleName::warmup_cosine, "warmup_cosine"}});
  v.values["sched.warmup_steps"] = c.sched.warmup_steps;
  v.values["sched.min_lr"] = c.sched.min_lr;
  v.values["train.epochs"] = c.train.epochs;
  v.values["train.max_steps"] = c.train.max_steps;
  v.values["train.grad_accum_steps"] = c.train.grad_accum_steps;
  v.values["train.seed"] = c.train.seed;
  v.values["train.log_interval"] = c.train.log_interval;
  v.values["train.device"] = name_of(c.train.device, {{DeviceName::auto_select, "auto"},
                                                       {DeviceName::cpu, "cpu"},
                                                       {DeviceName::cuda, "cuda"}});
  v.values["train.threads"] = c.train.threads;
  v.values["train.eval_batch_size"] = c.train.eval_batch_size;
  v.values["amp.enabled"] = c.amp.enabled;
  v.values["amp.dtype"] = name_of(c.amp.dtype, {{AmpDtype::fp16, "fp16"}, {AmpDtype::bf16, "bf16"}});
  v.values["checkpoint.dir"] = c.checkpoint.dir;
  v.values["checkpoint.save_every"] = c.checkpoint.save_every;
  v.values["checkpoint.resume_from"] = c.checkpoint.resume_from;
  v.values["dist.backend"] = name_of(c.dist.backend, {{DistBackend::auto_select, "auto"},
                                                       {DistBackend::nccl, "nccl"},
                                                       {DistBackend::gloo, "gloo"}});
  v.values["dist.bucket_cap_mb"] = c.dist.bucket_cap_mb;
  v.values["output.dir"] = c.output.dir;
  v.values["profile.enabled"] = c.profile.enabled;
  return config::to_yaml(schema(), v);
}

std::string train_config_help() { return config::help(schema()); }

}  // namespace cg::apps
