// FULL_SHARD (full_shard.h): what the optimizer steps (this rank's slices of every unit), the
// whole state gathered back unit by unit for checkpoints, and the figures logs and tests read.
#include <algorithm>
#include <map>
#include <set>

#include "dist/full_shard.h"
#include "dist/state_shards.h"
#include "engine/autograd/grad_mode.h"
#include "util/check.h"

namespace cg::dist {

namespace {

// A unit's parameters (their names and shapes) with their offsets: what the state gather needs.
struct UnitLayout {
  nn::NamedTensors params;
  std::vector<int64_t> offsets;
};

}  // namespace

void FullShard::attach(nn::Optimizer& optimizer) {
  optimizer_ = &optimizer;
  std::vector<nn::Optimizer::Slice> slices;
  for (const auto& u : units_)
    for (size_t k = 0; k < u->params.size(); ++k) {
      const auto& [name, p] = params_[u->params[k]];
      const int64_t begin = std::max(u->lo, u->offset[k]), end = std::min(u->hi, u->offset[k] + p.numel());
      if (end <= begin) continue;
      slices.push_back({.name = name,
                        .range = {begin - u->offset[k], end - begin},
                        .param = u->shard.view_at(begin - u->lo, {end - begin}),
                        .grad = u->grad_shard.view_at(begin - u->lo, {end - begin})});
    }
  optimizer.shard(std::move(slices));
}

nn::NamedTensors FullShard::full_optimizer_state() {
  CG_CHECK(optimizer_, "DDP: attach the optimizer before asking for its state");
  autograd::NoGradGuard no_grad;
  const Stream s = current_stream(device_);
  const std::vector<std::string> kinds = optimizer_->state_kinds();
  state::StateShards mine = state::shards_by_kind(*optimizer_);
  const std::vector<float> flags = state::agree_on_kinds(transport_, kinds, mine, device_, s);
  const std::map<std::string, nn::Optimizer::Range>& owned = optimizer_->shard_ranges();
  std::map<std::string, Tensor> whole;  // "<kind>.<param>" -> tensor
  for (const auto& u : units_) {
    UnitLayout layout;
    for (size_t k = 0; k < u->params.size(); ++k) {
      layout.params.push_back(params_[u->params[k]]);
      layout.offsets.push_back(u->offset[k]);
    }
    std::map<std::string, Tensor> gathered;  // kind -> the unit's flat buffer
    for (size_t k = 0; k < kinds.size(); ++k) {
      if (flags[2 * k] == 0.f) continue;
      Tensor flat = Tensor::zeros({u->padded}, DType::f32, device_);
      state::write_owned_shards(flat, layout.params, layout.offsets, owned, mine[kinds[k]], device_);
      const std::string what = fmt::format("optimizer state '{}' of unit '{}'", kinds[k], u->name);
      transport_.wait(*shards_.all_gather_shards(flat, s, what), s);
      gathered[kinds[k]] = flat;
    }
    for (auto& [key, t] : state::unsharded_state(layout.params, layout.offsets, kinds, flags, gathered))
      whole[key] = t;
  }
  nn::NamedTensors out;  // in the unsharded order: parameter by parameter, kind by kind
  for (const auto& [name, p] : params_)
    for (const std::string& kind : kinds)
      if (auto it = whole.find(kind + "." + name); it != whole.end()) out.emplace_back(it->first, it->second);
  return out;
}

// Unit by unit, so no rank but rank 0 (which keeps the copy) ever holds more than one unit whole.
nn::NamedTensors FullShard::full_model_state(const nn::Module& model) {
  CG_CHECK(&model == &model_, "full_shard: the full state of a model it does not shard");
  autograd::NoGradGuard no_grad;
  const bool keep = transport_.rank() == 0;
  std::map<std::string, Tensor> params;
  for (size_t u = 0; u < units_.size(); ++u) {
    gather(u, DType::f32);  // the masters, whatever the forward gathers in
    if (keep)
      for (size_t i : units_[u]->params) params[params_[i].first] = params_[i].second.clone();
    reshard(u);
  }
  std::set<std::string> param_names;
  for (const auto& [name, p] : params_) param_names.insert(name);
  nn::NamedTensors out;
  for (const auto& [name, t] : model.state_dict()) {
    if (auto it = params.find(name); it != params.end()) out.emplace_back(name, it->second);  // rank 0's copy
    else if (param_names.count(name)) out.emplace_back(name, Tensor());  // the other ranks keep none
    else out.emplace_back(name, t);  // a buffer: the same on every rank
  }
  return out;
}

nn::NamedTensors FullShard::replicated_state(const nn::Module& model) { return model.named_buffers(); }

Reducer::Resident FullShard::resident_bytes() const {
  Resident r;
  for (const auto& u : units_) {
    r.parameters += int64_t(u->shard.nbytes());
    if (!u->full.impl().storage->released()) r.parameters += int64_t(u->full.nbytes());
    r.gradients += int64_t(u->grad_shard.nbytes());
    if (u->grad_full.defined()) r.gradients += int64_t(u->grad_full.nbytes());
  }
  if (optimizer_) r.optimizer_state = optimizer_->state_bytes();
  return r;
}

size_t FullShard::bytes_per_step() const {
  size_t total = 0;
  for (const auto& u : units_) total += size_t(u->count) * sizeof(float);
  return total;
}

// Per unit, three halves of its node's ring: the forward's all-gather and the backward's (in
// param_dtype_), the gradients' reduce-scatter (float32); under hybrid_shard, the all-reduce of
// its shard across the nodes. Timed on the transports the unit really uses, whatever `comm` the
// job's DDP holds.
double FullShard::modeled_ms_per_step(const GradientComm&) const {
  double total = 0;
  for (const auto& u : units_) {
    total += 0.5 * transport_.modeled_ms(size_t(u->count) * sizeof(float)) +
             transport_.modeled_ms(size_t(u->count) * itemsize(param_dtype_));
    if (replicas_) total += replicas_->modeled_ms(size_t(u->hi - u->lo) * sizeof(float));
  }
  return total;
}

std::string FullShard::describe() const {
  int64_t owned = 0, total = 0, largest = 0;
  for (const auto& u : units_) {
    owned += u->hi - u->lo;
    total += u->count;
    largest = std::max(largest, u->count);
  }
  // A modeled ring's size() is its one real rank: its name says what it stands for.
  const auto ranks = [](const GradientComm& c, const char* what) {
    return c.modeled_ms(sizeof(float)) > 0 ? c.name() : fmt::format("{} {}", c.size(), what);
  };
  const std::string across = replicas_ ? fmt::format(" over this node's {}, the shards then all-reduced across {}",
                                                     ranks(transport_, "ranks"), ranks(*replicas_, "nodes"))
                                       : "";
  const std::string gathered =
      param_dtype_ == DType::f32 ? "" : fmt::format(" (in {}: {} bytes)", dtype_name(param_dtype_), total * itemsize(param_dtype_));
  return fmt::format("{} units (the root and {} more; the largest {} elements), {} bytes of parameters all-gathered{} "
                     "twice per step (forward, backward) and of gradients reduce-scattered{}; this rank keeps {} of {} "
                     "elements of parameters, gradients and optimizer state",
                     units_.size(), units_.size() - 1, largest, bytes_per_step(), gathered, across, owned, total);
}

size_t FullShard::all_reduces_in_flight() const {
  return size_t(std::count_if(replicating_.begin(), replicating_.end(), [](const auto& w) { return !w->done(); }));
}

const GradientBuckets& FullShard::buckets() const {
  throw UsageError("dist.sharding=full_shard gathers and reduces per unit: it has no gradient buckets");
}

std::vector<FullShard::UnitView> FullShard::units() const {
  std::vector<UnitView> out;
  for (const auto& u : units_) {
    int64_t n = 0;
    for (size_t i : u->params) n += params_[i].second.numel();
    out.push_back({u->name, n, int64_t(u->full.nbytes())});
  }
  return out;
}

}  // namespace cg::dist
