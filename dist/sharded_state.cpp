// The sharded optimizer state gathered back whole (ShardedBuckets::full_optimizer_state), for
// checkpoints in the unsharded format: each kind of state goes through a flat buffer laid out as
// the parameters, each rank writing its shards and the all-gather filling in the rest.
#include <map>
#include <string>

#include "dist/sharded_buckets.h"
#include "dist/state_shards.h"
#include "engine/autograd/grad_mode.h"
#include "util/check.h"

namespace cg::dist {

namespace {

// "exp_avg.layer1.0.conv.weight" -> {"exp_avg", "layer1.0.conv.weight"}: state names hold no dot.
std::pair<std::string, std::string> split_state_key(const std::string& key) {
  const size_t dot = key.find('.');
  CG_CHECK(dot != std::string::npos, "optimizer state key '{}' has no '<state>.' prefix", key);
  return {key.substr(0, dot), key.substr(dot + 1)};
}

}  // namespace

namespace state {

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
  comm.wait(*comm.all_reduce_average(agreed, s, "optimizer state kinds"), s);
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

}  // namespace state

using namespace state;

nn::NamedTensors ShardedBuckets::full_optimizer_state() {
  CG_CHECK(optimizer_, "DDP: attach the optimizer before asking for its state");
  autograd::NoGradGuard no_grad;
  if (!sharding_active_) return optimizer_->state_tensors();  // whole and equal on every rank
  wait_for_parameters();
  const Device device = buckets_.device();
  const Stream s = current_stream(device);
  // Which kinds of state exist anywhere, and which are per-parameter scalars (AdamW's step).
  const std::vector<std::string> kinds = optimizer_->state_kinds();
  StateShards mine = shards_by_kind(*optimizer_);
  const std::vector<float> flags = agree_on_kinds(transport_, kinds, mine, device, s);

  // Each kind goes through a flat buffer laid out as the parameters: this rank writes its shards,
  // the all-gather fills in the rest.
  const auto owned = owned_ranges();
  std::map<std::string, Tensor> gathered;  // kind -> flat
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (flags[2 * k] == 0.f) continue;
    Tensor flat = Tensor::zeros({flat_params_.numel()}, DType::f32, device);
    write_owned_shards(flat, buckets_.params(), buckets_.offsets(), owned, mine[kinds[k]], device);
    std::vector<std::shared_ptr<Work>> works;
    for (size_t b = 0; b < buckets_.size(); ++b) {
      Tensor bucket = flat.view_at(buckets_[b].offset, {buckets_[b].padded});
      const std::string what = fmt::format("optimizer state '{}' of bucket {}", kinds[k], b);
      works.push_back(shards_.all_gather_shards(bucket, s, what));
    }
    for (auto& w : works) transport_.wait(*w, s);
    gathered[kinds[k]] = flat;
  }
  return unsharded_state(buckets_.params(), buckets_.offsets(), kinds, flags, gathered);
}

}  // namespace cg::dist
