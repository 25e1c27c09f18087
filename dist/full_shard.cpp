// FULL_SHARD (full_shard.h): the units, their gathers and reshards around forward and backward,
// the gradients' reduce-scatter per unit. Rule: a unit's flat buffer is laid out as a bucket of
// DDP's (each parameter at an aligned offset, the padding zero) and cut into shards by the
// transport's shard_bounds, so a rank's shard of a unit is what its reduce-scatter leaves and what
// its all-gather sends.
#include "dist/full_shard.h"

#include <algorithm>

#include "engine/autograd/grad_mode.h"
#include "engine/ops.h"
#include "util/check.h"
#include "util/nvtx.h"
#include "util/trace.h"

namespace cg::dist {

FullShard::FullShard(nn::Module& model, GradientComm& transport, GradientComm& bucket_comm,
                     const UnitPolicy& is_unit, GradientComm* replicas, DType param_dtype)
    : model_(model),
      transport_(transport),
      bucket_comm_(bucket_comm),
      replicas_(replicas),
      param_dtype_(param_dtype),
      shards_(require_shard_collectives(transport, "dist.sharding=full_shard")),
      params_(model.named_parameters()) {
  CG_CHECK(!params_.empty(), "DDP: the model has no parameters");
  device_ = params_.front().second.device();
  build_units(is_unit);
  install_hooks();
}

FullShard::~FullShard() {
  model_.set_forward_hooks({});
  model_.for_each_module([](const std::string&, nn::Module& m) { m.set_forward_hooks({}); });
  for (auto& u : units_)
    for (auto* w : {&u->gathering, &u->reducing}) {
      if (!*w) continue;
      try {  // the communication thread may still write into the unit's buffers
        transport_.wait(**w, current_stream(device_));
      } catch (const std::exception&) {  // reported by whoever waited first, or moot now
      }
    }
  for (auto& w : replicating_) {
    try {  // the replica group's thread may still write into a gradient shard
      replicas_->wait(*w, current_stream(device_));
    } catch (const std::exception&) {
    }
  }
}

// Each parameter goes to the innermost unit whose name prefixes its own; the root takes the rest.
void FullShard::build_units(const UnitPolicy& is_unit) {
  autograd::NoGradGuard no_grad;
  units_.push_back(std::make_unique<Unit>());
  model_.for_each_module([&](const std::string& name, nn::Module& m) {
    if (name.empty() || !is_unit(name, m) || m.named_parameters().empty()) return;
    units_.push_back(std::make_unique<Unit>());
    units_.back()->name = name;
  });
  unit_of_.assign(params_.size(), 0);
  for (size_t i = 0; i < params_.size(); ++i) {
    size_t best = 0;
    for (size_t u = 1; u < units_.size(); ++u) {
      const std::string prefix = units_[u]->name + ".";
      if (params_[i].first.rfind(prefix, 0) == 0 && prefix.size() > units_[best]->name.size() + 1) best = u;
    }
    unit_of_[i] = best;
    units_[best]->params.push_back(i);
  }
  const int me = transport_.rank();
  for (auto& u : units_) {
    int64_t offset = 0;
    for (size_t i : u->params) {
      offset = align_to_flat(offset);
      u->offset.push_back(offset);
      offset += params_[i].second.numel();
    }
    u->count = offset;
    const std::vector<int64_t> bounds = shards_.shard_bounds(std::max<int64_t>(offset, 1));
    u->padded = bounds.back();
    u->lo = bounds[size_t(me)];
    u->hi = bounds[size_t(me) + 1];
    u->full = Tensor::zeros({u->padded}, DType::f32, device_);
    for (size_t k = 0; k < u->params.size(); ++k) {
      Tensor p = params_[u->params[k]].second;
      CG_CHECK(p.dtype() == DType::f32, "dist.sharding=full_shard: parameter '{}' is {}, float32 expected",
               params_[u->params[k]].first, p.str());
      p.relocate_to(u->full.view_at(u->offset[k], p.shape()));
    }
    u->shard = u->full.view_at(u->lo, {u->hi - u->lo}).clone();
    u->grad_shard = Tensor::zeros({u->hi - u->lo}, DType::f32, device_);
    u->full.impl().storage->release();
  }
}

void FullShard::install_hooks() {
  // The root: gathered as the model's forward starts, kept until its backward is done (its head
  // runs last forward and first backward), freed at once when no backward follows.
  model_.set_forward_hooks({.before = [this] { before_forward(0); }, .after = [this](const Tensor& y) {
                              return after_forward(0, y);
                            }});
  size_t u = 1;
  model_.for_each_module([&](const std::string& name, nn::Module& m) {
    if (u < units_.size() && name == units_[u]->name) {
      m.set_forward_hooks({.before = [this, u] { before_forward(u); }, .after = [this, u](const Tensor& y) {
                             return after_forward(u, y);
                           }});
      ++u;
    }
  });
}

// ---- gathers

void FullShard::issue_gather(size_t u, DType as) {
  Unit& unit = *units_[u];
  if (unit.gathered || unit.gathering) {
    CG_CHECK(unit.gathered_as == as, "full_shard: unit '{}' is gathered in {}, and {} was asked for", unit.name,
             dtype_name(unit.gathered_as), dtype_name(as));
    return;
  }
  events_.push_back(fmt::format("g{}", u));
  autograd::NoGradGuard no_grad;
  unit.full.impl().storage->reacquire();
  unit.gathered_as = as;
  Tensor* moved = &unit.full;
  if (as != DType::f32) {  // the shard cast to the wire's 16 bits
    unit.wire = Tensor::empty({unit.padded}, as, device_);
    moved = &unit.wire;
  }
  moved->view_at(unit.lo, {unit.hi - unit.lo}).copy_(unit.shard);
  unit.gathering = shards_.all_gather_shards(*moved, current_stream(device_),
                                             fmt::format("parameters of unit '{}'", unit.name));
}

void FullShard::gather(size_t u, DType as) {
  Unit& unit = *units_[u];
  issue_gather(u, as);
  if (unit.gathering) {
    trace::Span span("wait for all-gather", "compute");
    transport_.wait(*unit.gathering, current_stream(device_));
    unit.gathering.reset();
  }
  if (unit.wire.defined()) {  // the 16-bit gather, widened for the kernels
    autograd::NoGradGuard no_grad;
    unit.full.copy_(unit.wire);
    unit.wire = Tensor();
  }
  unit.gathered = true;
}

void FullShard::reshard(size_t u) {
  Unit& unit = *units_[u];
  if (unit.gathering) gather(u, unit.gathered_as);  // never free memory a collective still writes into
  unit.full.impl().storage->release();
  unit.gathered = false;
}

// ---- forward and backward hooks

void FullShard::before_forward(size_t u) {
  if (u == 0) events_.clear();  // a new forward: keep one step's (or evaluation batch's) events
  events_.push_back(fmt::format("f{}", u));
  gather(u, param_dtype_);
  if (u + 1 < units_.size()) issue_gather(u + 1, param_dtype_);  // prefetch: it travels while this unit computes
}

Tensor FullShard::after_forward(size_t u, const Tensor& y) {
  const bool backward_follows = autograd::grad_enabled() && y.requires_grad();
  if (!backward_follows) {
    reshard(u);
    return y;
  }
  if (u != 0) reshard(u);  // the root stays: its head is the first backward
  return ops::backward_hook(y, [this, u] { before_backward(u); });
}

// Backward meets the units in reverse: the root first (still gathered), then the last unit.
void FullShard::before_backward(size_t u) {
  events_.push_back(fmt::format("b{}", u));
  Unit& unit = *units_[u];
  gather(u, param_dtype_);
  const size_t next = u == 0 ? units_.size() - 1 : u - 1;
  if (next != 0 && next != u) issue_gather(next, param_dtype_);
  if (!unit.grad_full.defined()) {  // from the first backward after a synced one
    unit.grad_full = Tensor::zeros({unit.padded}, DType::f32, device_);
    for (size_t k = 0; k < unit.params.size(); ++k) {
      Tensor& p = params_[unit.params[k]].second;
      p.set_grad(unit.grad_full.view_at(unit.offset[k], p.shape()));
    }
  }
}

void FullShard::prepare_for_backward(bool sync) {
  CG_CHECK(optimizer_, "DDP with dist.sharding=full_shard: attach(optimizer) before the first forward");
  for (auto& u : units_) u->pending = u->params.size();
  ready_.assign(params_.size(), 0);
  sync_backward_ = sync;
  in_backward_ = true;
}

void FullShard::gradient_ready(size_t param) {
  if (!in_backward_) return;
  Unit& unit = *units_[unit_of_[param]];
  CG_CHECK(!ready_[param], "DDP: parameter '{}' got its gradient twice in one backward", params_[param].first);
  ready_[param] = 1;
  if (--unit.pending == 0) unit_gradients_final(unit_of_[param]);
}

// Its gradients are final: reduce-scattered (synced backward), and its parameters freed.
void FullShard::unit_gradients_final(size_t u) {
  Unit& unit = *units_[u];
  if (sync_backward_) {
    CG_NVTX_RANGE("FSDP reduce-scatter issue");
    unit.reducing = bucket_comm_.shards()->reduce_scatter_average(unit.grad_full, current_stream(device_),
                                                                   fmt::format("gradients of unit '{}'", unit.name));
    finish_reduction();  // the previous unit's: it ran during this unit's backward
    reducing_unit_ = u;
  }
  reshard(u);
}

// One reduction behind: the one in flight is waited for, its shard kept and its whole gradients
// freed. hybrid_shard then starts averaging the shard over the nodes; those all-reduces run on the
// replica group's own thread or stream while backward goes on, and are waited for together in
// wait_for_gradients.
void FullShard::finish_reduction() {
  if (!reducing_unit_) return;
  const size_t u = *reducing_unit_;
  Unit& unit = *units_[u];
  reducing_unit_.reset();
  transport_.wait(*unit.reducing, current_stream(device_));
  unit.reducing.reset();
  autograd::NoGradGuard no_grad;
  unit.grad_shard.copy_(unit.grad_full.view_at(unit.lo, {unit.hi - unit.lo}));
  if (replicas_) {
    events_.push_back(fmt::format("a{}", u));
    replicating_.push_back(replicas_->all_reduce_average(
        unit.grad_shard, current_stream(device_), fmt::format("gradient shard of unit '{}' across nodes", unit.name)));
  }
  unit.grad_full = Tensor();
  for (size_t i : unit.params) params_[i].second.impl().grad.reset();
}

void FullShard::wait_for_gradients() {
  events_.push_back("w");
  in_backward_ = false;
  if (!sync_backward_) return;
  check_every_gradient_arrived(params_, ready_, "unit was never reduce-scattered");
  trace::Span span("wait for reduce-scatters", "compute");
  finish_reduction();
  for (auto& w : replicating_) replicas_->wait(*w, current_stream(device_));
  replicating_.clear();
}

void FullShard::zero_grad() {
  for (auto& u : units_) {
    u->grad_shard.zero_();
    if (u->grad_full.defined()) u->grad_full.zero_();
  }
}

}  // namespace cg::dist
