// The training configuration: every key of the seed article's TrainingConfig plus the data and
// model choices, as a plain struct. The schema (names, types, defaults, ranges, help) lives in
// train_config.cpp; `cudagrad-train --help` prints it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cg::apps {

enum class DatasetName { fashion_mnist, cifar10, synthetic };
enum class OptimizerName { sgd, adamw };
enum class ScheduleName { constant, cosine, warmup_cosine };
enum class DeviceName { auto_select, cpu, cuda };
enum class AmpDtype { fp16, bf16 };
enum class DistBackend { auto_select, nccl, gloo };

struct TrainConfig {
  struct {
    std::vector<int64_t> widths, blocks;
    int64_t in_channels, num_classes;
    std::string init_from;
  } model;
  struct {
    DatasetName dataset;
    std::string path;
    int64_t image_size, batch_size, num_workers, synthetic_size;
    bool shuffle, augment;
  } data;
  struct {
    OptimizerName name;
    double lr, momentum, weight_decay, beta1, beta2, eps;
    bool nesterov;
  } optim;
  struct {
    ScheduleName name;
    int64_t warmup_steps;
    double min_lr;
  } sched;
  struct {
    int64_t epochs, max_steps, grad_accum_steps, seed, log_interval, threads, eval_batch_size;
    DeviceName device;
  } train;
  struct {
    bool enabled;
    AmpDtype dtype;
  } amp;
  struct {
    std::string dir, resume_from;
    int64_t save_every;
  } checkpoint;
  struct {
    DistBackend backend;
    double bucket_cap_mb, timeout_s;
  } dist;
  struct {
    std::string dir;
  } output;
  struct {
    bool enabled;
  } profile;
};

// Loads `yaml_path` (empty: defaults only) and applies key=value overrides. Throws
// cg::UsageError naming the key (and file:line) on any unknown key, wrong type or bad value.
TrainConfig load_train_config(const std::string& yaml_path, const std::vector<std::string>& overrides);
// The resolved config as YAML (every key); loading it back gives the same config.
std::string to_yaml(const TrainConfig& config);
// Every key with its type, default and meaning.
std::string train_config_help();

}  // namespace cg::apps
