#include "nn/checkpoint.h"

#include <cstring>

#include "util/safetensors.h"

namespace cg::nn {
namespace {

constexpr const char* kOptimPrefix = "optim.";

safetensors::TensorRecord to_record(const Tensor& live) {
  const Tensor t = live.to(Device::cpu());  // GPU state is copied out (waiting for the device)
  safetensors::TensorRecord r;
  r.dtype = std::string(dtype_safetensors_name(t.dtype()));
  r.shape = t.shape();
  r.bytes.resize(t.nbytes());
  std::memcpy(r.bytes.data(), t.raw_data(), t.nbytes());
  return r;
}

Tensor from_record(const std::string& name, const safetensors::TensorRecord& r) {
  Tensor t = Tensor::empty(r.shape, dtype_from_safetensors_name(r.dtype));
  CG_CHECK(r.bytes.size() == t.nbytes(), "tensor '{}' has {} bytes for {}", name, r.bytes.size(),
           t.str());
  std::memcpy(t.raw_data(), r.bytes.data(), t.nbytes());
  return t;
}

int64_t metadata_int(const safetensors::File& f, const std::string& path, const std::string& key) {
  auto it = f.metadata.find(key);
  if (it == f.metadata.end())
    throw Error(fmt::format("checkpoint {} lacks '{}': not a cudagrad training checkpoint", path, key));
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    throw Error(fmt::format("checkpoint {}: metadata '{}' = '{}' is not an integer", path, key, it->second));
  }
}

std::string metadata_str(const safetensors::File& f, const std::string& key) {
  auto it = f.metadata.find(key);
  return it == f.metadata.end() ? std::string() : it->second;
}

}  // namespace

void save_checkpoint(const std::string& path, const Module& model, const Optimizer& optimizer,
                     const TrainingProgress& p, const NamedTensors* optimizer_state) {
  CG_CHECK(optimizer_state || !optimizer.sharded(),
           "save_checkpoint: the optimizer holds only this rank's shard of its state (ZeRO-1); pass the state "
           "gathered from all ranks");
  safetensors::File file;
  for (const auto& [name, t] : model.state_dict()) file.tensors.emplace_back(name, to_record(t));
  for (const auto& [name, t] : optimizer_state ? *optimizer_state : optimizer.state_tensors())
    file.tensors.emplace_back(kOptimPrefix + name, to_record(t));
  file.metadata["cudagrad.kind"] = "training_checkpoint";
  file.metadata["cudagrad.epoch"] = std::to_string(p.epoch);
  file.metadata["cudagrad.batch_in_epoch"] = std::to_string(p.batch_in_epoch);
  file.metadata["cudagrad.step"] = std::to_string(p.step);
  file.metadata["cudagrad.optimizer"] = p.optimizer;
  file.metadata["cudagrad.optimizer_steps"] = std::to_string(optimizer.steps_taken());
  file.metadata["cudagrad.rng_state"] = p.rng_state;
  file.metadata["cudagrad.config"] = p.config_yaml;
  if (p.loss_scale > 0) {
    file.metadata["cudagrad.loss_scale"] = fmt::format("{}", p.loss_scale);  // shortest exact form
    file.metadata["cudagrad.loss_scale_growth_tracker"] = std::to_string(p.loss_scale_growth_tracker);
  }
  safetensors::save(path, file);
}

TrainingProgress load_checkpoint(const std::string& path, Module& model, Optimizer& optimizer) {
  const safetensors::File file = safetensors::load(path);
  if (metadata_str(file, "cudagrad.kind") != "training_checkpoint")
    throw Error(fmt::format("{} is not a cudagrad training checkpoint (use model.init_from to start "
                            "from bare weights)", path));
  std::map<std::string, Tensor> model_values, optim_values;
  for (const auto& [name, record] : file.tensors) {
    if (name.rfind(kOptimPrefix, 0) == 0) {
      optim_values[name.substr(std::strlen(kOptimPrefix))] = from_record(name, record);
    } else {
      model_values[name] = from_record(name, record);
    }
  }
  try {
    model.load_state_dict(model_values, /*strict=*/true);
  } catch (const Error& e) {
    throw Error(fmt::format("checkpoint {} does not fit the model: {}", path, e.what()));
  }
  TrainingProgress p;
  p.epoch = metadata_int(file, path, "cudagrad.epoch");
  p.batch_in_epoch = metadata_int(file, path, "cudagrad.batch_in_epoch");
  p.step = metadata_int(file, path, "cudagrad.step");
  p.optimizer = metadata_str(file, "cudagrad.optimizer");
  p.rng_state = metadata_str(file, "cudagrad.rng_state");
  p.config_yaml = metadata_str(file, "cudagrad.config");
  if (!metadata_str(file, "cudagrad.loss_scale").empty()) {
    const std::string scale = metadata_str(file, "cudagrad.loss_scale");
    char* end = nullptr;
    p.loss_scale = std::strtod(scale.c_str(), &end);
    if (end == scale.c_str() || *end != '\0' || !(p.loss_scale > 0))
      throw Error(fmt::format("checkpoint {}: metadata cudagrad.loss_scale='{}' is not a positive number", path, scale));
    p.loss_scale_growth_tracker = metadata_int(file, path, "cudagrad.loss_scale_growth_tracker");
  }
  optimizer.load_state_tensors(optim_values, metadata_int(file, path, "cudagrad.optimizer_steps"));
  return p;
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
