// The training loop behind cudagrad-train: builds data, model, optimizer and schedule from a
// TrainConfig, trains with gradient accumulation, evaluates after every epoch, logs metrics.jsonl,
// checkpoints atomically and resumes bit-exactly. What the seed article's train.py does, natively.
#pragma once
#include <string>

#include "apps/common/train_config.h"

namespace cg::apps {

struct TrainResult {
  double test_accuracy = 0;  // of the last evaluation
  double test_loss = 0;
  int64_t steps = 0;          // optimizer steps taken in total
  std::string checkpoint;     // the last checkpoint written
  bool interrupted = false;   // stopped early by SIGINT/SIGTERM (a checkpoint was written)
};

// Runs training as configured. `config_yaml` is the resolved config, saved in the output
// directory and in checkpoints. Throws cg::Error on bad data, checkpoints or I/O.
TrainResult train(const TrainConfig& config, const std::string& config_yaml);

// Installs SIGINT/SIGTERM handlers that ask the loop to stop after the current step, write a
// checkpoint and return with `interrupted` set (a preempted job resumes from it).
void install_stop_signal_handlers();

}  // namespace cg::apps
