// ZeRO-1 inside DDP (DdpOptions::zero_sharding): which elements a rank owns, the optimizer cut to
// them, the parameters' all-gather after the step, and the optimizer state gathered back whole for
// checkpoints. Rule: a rank owns shard rank() of every bucket (GradientComm::shard_bounds), so the
// reduce-scatter leaves exactly the gradients it updates, and the all-gather exactly the
// parameters the others updated. With dist.grad_compression the reduce-scatter is the 16-bit one
// (dist/ddp.cpp issues it); everything here stays float32.
#include <algorithm>
#include <cmath>

#include "dist/ddp.h"
#include "engine/autograd/grad_mode.h"
#include "util/check.h"
#include "util/nvtx.h"
#include "util/trace.h"

namespace cg::dist {

DistributedDataParallel::~DistributedDataParallel() {
  for (auto& w : gathers_) {  // the communication thread may still write into flat_params_
    if (!w) continue;
    try {
      comm_->wait(*w, current_stream(device_));
    } catch (const std::exception&) {  // reported by whoever waited first, or moot now
    }
  }
}

void DistributedDataParallel::attach(nn::Optimizer& optimizer) {
  CG_CHECK(options_.zero_sharding, "DDP: attach(optimizer) is for zero_sharding, which is off");
  CG_CHECK(!sharding_active_, "DDP: attach the optimizer before the first forward");
  optimizer_ = &optimizer;
}

std::map<std::string, nn::Optimizer::Range> DistributedDataParallel::owned_ranges() const {
  std::map<std::string, nn::Optimizer::Range> out;
  const int me = comm_->shard_rank();
  for (const Bucket& b : buckets_) {
    const std::vector<int64_t> bounds = comm_->shard_bounds(b.count);
    const int64_t lo = b.offset + bounds[size_t(me)], hi = b.offset + bounds[size_t(me) + 1];
    for (size_t i : b.params) {
      const int64_t begin = std::max(lo, param_offset_[i]);
      const int64_t end = std::min(hi, param_offset_[i] + params_[i].second.numel());
      if (end > begin) out[params_[i].first] = {begin - param_offset_[i], end - begin};
    }
  }
  return out;
}

// After the first synced step (all ranks updated everything alike) and the bucket rebuild: from
// now on the optimizer keeps this rank's shards only; the state it has is cut down to them.
void DistributedDataParallel::activate_sharding() {
  CG_CHECK(optimizer_, "DDP with zero_sharding: attach(optimizer) before the first forward");
  optimizer_->shard(owned_ranges());
  sharding_active_ = true;
}

void DistributedDataParallel::start_parameter_gather() {
  if (!sharding_active_) return;
  CG_NVTX_RANGE("DDP all-gather issue");
  gathers_.clear();
  for (size_t i = 0; i < buckets_.size(); ++i) {
    const Bucket& b = buckets_[i];
    gathers_.push_back(comm_->all_gather_shards(flat_params_.data<float>() + b.offset, b.padded,
                                                current_stream(device_), fmt::format("parameters of bucket {}", i)));
  }
  gathers_pending_ = true;
}

void DistributedDataParallel::wait_for_parameters() {
  if (!gathers_pending_) return;
  trace::Span span("wait for all-gathers", "compute");
  gathers_pending_ = false;
  for (auto& w : gathers_) comm_->wait(*w, current_stream(device_));
}

int64_t DistributedDataParallel::total_elements() const {
  int64_t n = 0;
  for (const auto& [name, p] : params_) n += p.numel();
  return n;
}

int64_t DistributedDataParallel::owned_elements() const {
  if (!options_.zero_sharding) return total_elements();
  int64_t n = 0;
  for (const auto& [name, r] : owned_ranges()) n += r.count;
  return n;
}

namespace {

// "exp_avg.layer1.0.conv.weight" -> {"exp_avg", "layer1.0.conv.weight"}: state names hold no dot.
std::pair<std::string, std::string> split_state_key(const std::string& key) {
  const size_t dot = key.find('.');
  CG_CHECK(dot != std::string::npos, "optimizer state key '{}' has no '<state>.' prefix", key);
  return {key.substr(0, dot), key.substr(dot + 1)};
}

using StateShards = std::map<std::string, std::map<std::string, Tensor>>;  // kind -> param -> shard

// The optimizer's state tensors by kind and parameter.
StateShards shards_by_kind(const nn::Optimizer& optimizer) {
  StateShards mine;
  for (auto& [key, t] : optimizer.state_tensors()) {
    auto [kind, param] = split_state_key(key);
    mine[kind][param] = t;
  }
  return mine;
}

// Per kind, two flags averaged over the ranks, so every rank agrees even if it holds none: flags[2k]
// (the kind exists somewhere) and flags[2k + 1] (it is a per-parameter scalar, as AdamW's step).
std::vector<float> agree_on_kinds(GradientComm& comm, const std::vector<std::string>& kinds, StateShards& mine,
                                  Device device, const Stream& s) {
  std::vector<float> flags(2 * kinds.size(), 0.f);
  for (size_t k = 0; k < kinds.size(); ++k)
    for (const auto& [param, t] : mine[kinds[k]]) {
      flags[2 * k] = 1.f;
      if (t.dim() == 0) flags[2 * k + 1] = 1.f;
    }
  Tensor agreed = Tensor::from_vector(flags, {int64_t(flags.size())}).to(device);
  comm.wait(*comm.all_reduce_average(agreed.data<float>(), agreed.numel(), s, "optimizer state kinds"), s);
  return agreed.to_vector<float>();
}

// Writes this rank's shards of one kind into `flat` (laid out as the parameters): a scalar over all
// its owned elements of the parameter, a tensor copied.
void write_owned_shards(Tensor& flat, const nn::NamedTensors& params, const std::vector<int64_t>& param_offset,
                        const std::map<std::string, nn::Optimizer::Range>& owned,
                        const std::map<std::string, Tensor>& shards, Device device) {
  for (size_t i = 0; i < params.size(); ++i) {
    auto r = owned.find(params[i].first);
    auto t = shards.find(params[i].first);
    if (r == owned.end() || t == shards.end()) continue;
    Tensor slot = flat.view_at(param_offset[i] + r->second.begin, {r->second.count});
    if (t->second.dim() == 0) slot.fill_(t->second.item());
    else slot.copy_(t->second.to(device).view({r->second.count}));
  }
}

// The gathered kinds cut back into whole tensors, in the unsharded order: parameter by parameter,
// kind by kind.
nn::NamedTensors unsharded_state(const nn::NamedTensors& params, const std::vector<int64_t>& param_offset,
                                 const std::vector<std::string>& kinds, const std::vector<float>& flags,
                                 const std::map<std::string, Tensor>& gathered) {
  nn::NamedTensors out;
  for (size_t i = 0; i < params.size(); ++i)
    for (size_t k = 0; k < kinds.size(); ++k) {
      auto g = gathered.find(kinds[k]);
      if (g == gathered.end()) continue;
      const Tensor& p = params[i].second;
      const bool scalar = flags[2 * k + 1] != 0.f;
      Tensor whole = scalar ? g->second.view_at(param_offset[i], {}) : g->second.view_at(param_offset[i], p.shape());
      // Scalars (step counters) live on the host, as the optimizer keeps and saves them.
      out.emplace_back(kinds[k] + "." + params[i].first, scalar ? whole.to(Device::cpu()).clone() : whole.clone());
    }
  return out;
}

}  // namespace

nn::NamedTensors DistributedDataParallel::gather_optimizer_state() {
  CG_CHECK(optimizer_, "DDP: gather_optimizer_state needs the optimizer attached (zero_sharding)");
  autograd::NoGradGuard no_grad;
  if (!sharding_active_) return optimizer_->state_tensors();  // whole and equal on every rank
  wait_for_parameters();
  const Stream s = current_stream(device_);
  // Which kinds of state exist anywhere, and which are per-parameter scalars (AdamW's step).
  const std::vector<std::string> kinds = optimizer_->state_kinds();
  StateShards mine = shards_by_kind(*optimizer_);
  const std::vector<float> flags = agree_on_kinds(*comm_, kinds, mine, device_, s);

  // Each kind goes through a flat buffer laid out as the parameters: this rank writes its shards,
  // the all-gather fills in the rest.
  const auto owned = owned_ranges();
  std::map<std::string, Tensor> gathered;  // kind -> flat
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (flags[2 * k] == 0.f) continue;
    Tensor flat = Tensor::zeros({flat_.numel()}, DType::f32, device_);
    write_owned_shards(flat, params_, param_offset_, owned, mine[kinds[k]], device_);
    std::vector<std::shared_ptr<Work>> works;
    for (size_t b = 0; b < buckets_.size(); ++b)
      works.push_back(comm_->all_gather_shards(flat.data<float>() + buckets_[b].offset, buckets_[b].padded, s,
                                               fmt::format("optimizer state '{}' of bucket {}", kinds[k], b)));
    for (auto& w : works) comm_->wait(*w, s);
    gathered[kinds[k]] = flat;
  }
  return unsharded_state(params_, param_offset_, kinds, flags, gathered);
}

}  // namespace cg::dist
