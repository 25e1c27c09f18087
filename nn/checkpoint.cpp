#include "nn/checkpoint.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "nn/sharded_checkpoint.h"
#include "util/safetensors.h"

namespace cg::nn {

safetensors::TensorRecord to_record(const Tensor& live) {
  const Tensor t = live.to(Device::cpu());  // GPU state is copied out (waiting for the device)
  safetensors::TensorRecord r;
  r.dtype = std::string(dtype_safetensors_name(t.dtype()));
  r.shape = t.shape();
  r.bytes.resize(t.nbytes());
  if (t.nbytes() > 0) std::memcpy(r.bytes.data(), t.raw_data(), t.nbytes());  // a [0] tensor has no data pointer
  return r;
}

namespace {

constexpr const char* kOptimPrefix = kOptimizerStatePrefix;

Tensor from_record(const std::string& name, const safetensors::TensorRecord& r) {
  Tensor t = Tensor::empty(r.shape, dtype_from_safetensors_name(r.dtype));
  CG_CHECK(r.bytes.size() == t.nbytes(), "tensor '{}' has {} bytes for {}", name, r.bytes.size(),
           t.str());
  if (t.nbytes() > 0) std::memcpy(t.raw_data(), r.bytes.data(), t.nbytes());  // a [0] tensor has no data pointer
  return t;
}

using Metadata = std::map<std::string, std::string>;

// A counter from the metadata: a whole decimal number in [0, 2^62] (so that counting on from it
// cannot overflow), nothing else.
int64_t metadata_count(const Metadata& m, const std::string& path, const std::string& key) {
  auto it = m.find(key);
  if (it == m.end())
    throw Error(fmt::format("checkpoint {} lacks '{}': not a cudagrad training checkpoint", path, key));
  const std::string& text = it->second;
  size_t used = 0;
  int64_t v = -1;
  try {
    v = std::stoll(text, &used);
  } catch (const std::exception&) {
  }
  if (used != text.size() || v < 0 || v > (int64_t(1) << 62))
    throw Error(fmt::format("checkpoint {}: metadata '{}' = '{}' is not a count (a whole number in [0, 2^62])", path,
                            key, text));
  return v;
}

std::string metadata_str(const Metadata& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? std::string() : it->second;
}

// The whole state dict checked before any of it is copied in, so that a checkpoint that does not
// fit leaves the model as it was: same keys, and each tensor of the model's shape and dtype.
void check_fits_model(const std::string& path, const Module& model, const std::map<std::string, Tensor>& values) {
  auto unfit = [&](const std::string& why) { return Error(fmt::format("checkpoint {} does not fit the model: {}", path, why)); };
  std::set<std::string> known;
  for (const auto& [name, t] : model.state_dict()) {
    known.insert(name);
    auto it = values.find(name);
    if (it == values.end()) throw unfit(fmt::format("state dict is missing key '{}'", name));
    if (it->second.shape() != t.shape())
      throw unfit(fmt::format("state dict key '{}': shape {} does not match the model's {}", name,
                              shape_str(it->second.shape()), shape_str(t.shape())));
    if (it->second.dtype() != t.dtype())
      throw unfit(fmt::format("state dict key '{}' is {}, the model's is {}", name, dtype_name(it->second.dtype()),
                              dtype_name(t.dtype())));
  }
  for (const auto& [name, t] : values)
    if (!known.count(name)) throw unfit(fmt::format("state dict has unexpected key '{}'", name));
}

TrainingProgress read_progress(const Metadata& file, const std::string& path) {
  TrainingProgress p;
  p.epoch = metadata_count(file, path, "cudagrad.epoch");
  p.batch_in_epoch = metadata_count(file, path, "cudagrad.batch_in_epoch");
  p.step = metadata_count(file, path, "cudagrad.step");
  p.optimizer = metadata_str(file, "cudagrad.optimizer");
  p.rng_state = metadata_str(file, "cudagrad.rng_state");
  p.config_yaml = metadata_str(file, "cudagrad.config");
  const std::string scale = metadata_str(file, "cudagrad.loss_scale");
  if (scale.empty()) return p;
  char* end = nullptr;
  p.loss_scale = std::strtod(scale.c_str(), &end);
  // inf or nan would turn every scaled gradient into inf and skip every step without a word.
  if (end == scale.c_str() || *end != '\0' || !(p.loss_scale > 0) || !std::isfinite(p.loss_scale))
    throw Error(fmt::format("checkpoint {}: metadata cudagrad.loss_scale='{}' is not a positive finite number",
                            path, scale));
  p.loss_scale_growth_tracker = metadata_count(file, path, "cudagrad.loss_scale_growth_tracker");
  return p;
}

}  // namespace

void save_checkpoint(const std::string& path, const Module& model, const Optimizer& optimizer,
                     const TrainingProgress& p, const NamedTensors* optimizer_state) {
  save_checkpoint(path, model.state_dict(), optimizer, p, optimizer_state);
}

std::map<std::string, std::string> progress_metadata(const Optimizer& optimizer, const TrainingProgress& p) {
  Metadata m;
  m["cudagrad.kind"] = "training_checkpoint";
  m["cudagrad.epoch"] = std::to_string(p.epoch);
  m["cudagrad.batch_in_epoch"] = std::to_string(p.batch_in_epoch);
  m["cudagrad.step"] = std::to_string(p.step);
  m["cudagrad.optimizer"] = p.optimizer;
  m["cudagrad.optimizer_steps"] = std::to_string(optimizer.steps_taken());
  m["cudagrad.rng_state"] = p.rng_state;
  m["cudagrad.config"] = p.config_yaml;
  if (p.loss_scale > 0) {
    m["cudagrad.loss_scale"] = fmt::format("{}", p.loss_scale);  // shortest exact form
    m["cudagrad.loss_scale_growth_tracker"] = std::to_string(p.loss_scale_growth_tracker);
  }
  return m;
}

void save_checkpoint(const std::string& path, const NamedTensors& model_state, const Optimizer& optimizer,
                     const TrainingProgress& p, const NamedTensors* optimizer_state) {
  CG_CHECK(optimizer_state || !optimizer.sharded(),
           "save_checkpoint: the optimizer holds only this rank's shard of its state (dist.sharding); pass the "
           "state gathered from all ranks");
  safetensors::File file;
  for (const auto& [name, t] : model_state) file.tensors.emplace_back(name, to_record(t));
  for (const auto& [name, t] : optimizer_state ? *optimizer_state : optimizer.state_tensors())
    file.tensors.emplace_back(kOptimPrefix + name, to_record(t));
  file.metadata = progress_metadata(optimizer, p);
  safetensors::save(path, file);
}

TrainingProgress load_checkpoint_contents(const std::string& path, CheckpointContents c, Module& model,
                                          Optimizer& optimizer) {
  if (metadata_str(c.metadata, "cudagrad.kind") != "training_checkpoint")
    throw Error(fmt::format("{} is not a cudagrad training checkpoint (use model.init_from to start "
                            "from bare weights)", path));
  const std::string written_by = metadata_str(c.metadata, "cudagrad.optimizer");
  if (written_by != optimizer.name())
    throw Error(fmt::format("checkpoint {} was written by optimizer '{}', config says optim.name={}", path,
                            written_by, optimizer.name()));
  check_fits_model(path, model, c.model);
  TrainingProgress p = read_progress(c.metadata, path);
  // The optimizer checks its state completely before keeping any; then the model, already checked.
  try {
    optimizer.load_state_tensors(c.optimizer, metadata_count(c.metadata, path, "cudagrad.optimizer_steps"));
  } catch (const Error& e) {
    throw Error(fmt::format("checkpoint {} does not fit the optimizer: {}", path, e.what()));
  }
  model.load_state_dict(c.model, /*strict=*/true);
  return p;
}

TrainingProgress load_checkpoint(const std::string& path, Module& model, Optimizer& optimizer) {
  if (std::filesystem::is_directory(path)) return load_checkpoint_contents(path, read_sharded_checkpoint(path), model, optimizer);
  const safetensors::File file = safetensors::load(path);
  // save() always writes the format tag, so its checksum was verified; a training checkpoint
  // without one was edited after it was written, and nothing in it can be trusted.
  if (metadata_str(file.metadata, "cudagrad.kind") == "training_checkpoint" && !file.metadata.count(safetensors::kFormatKey))
    throw Error(fmt::format("checkpoint {} is corrupt: a training checkpoint without {} (and so without its "
                            "checksum) was altered after cudagrad wrote it", path, safetensors::kFormatKey));
  CheckpointContents c;
  c.metadata = file.metadata;
  for (const auto& [name, record] : file.tensors) {
    if (name.rfind(kOptimPrefix, 0) == 0) {
      c.optimizer[name.substr(std::strlen(kOptimPrefix))] = from_record(name, record);
    } else {
      c.model[name] = from_record(name, record);
    }
  }
  return load_checkpoint_contents(path, std::move(c), model, optimizer);
}

void load_model_weights(const std::string& path, Module& model) {
  const safetensors::File file = safetensors::load(path);
  std::map<std::string, Tensor> values;
  for (const auto& [name, t] : model.state_dict()) {
    const safetensors::TensorRecord* r = file.find(name);
    if (!r) throw Error(fmt::format("weights file {} has no tensor '{}'", path, name));
    values[name] = from_record(name, *r);
  }
  model.load_state_dict(values, /*strict=*/true);
}

}  // namespace cg::nn
