// dist.sharding=full_shard as a reducer (ZeRO-3; PyTorch FSDP's FULL_SHARD, one flat parameter
// per unit as FSDP1 kept it). The model is cut into units (is_unit picks the submodules that are
// units of their own: MiniResNet's residual blocks; every other parameter, the stem's and the
// head's, belongs to the root unit). Between steps a rank holds, of every unit, only its shard of
// the parameters (1/W, ShardCollectives::shard_bounds of the unit's flat length), of the gradients
// and (the attached optimizer's slices) of the optimizer state. In a step:
//   forward   before a unit runs, its parameters are all-gathered into the unit's flat buffer
//             (the next unit's gather is issued as this one starts: prefetch); after it, the
//             buffer's memory goes back to the allocator (engine/storage.h, release) while the
//             parameters and the backward's saved weights keep viewing it. The root unit stays
//             gathered until its backward (its head runs last forward and first backward).
//   backward  a hook on each unit's output (ops::backward_hook) gathers the unit again before its
//             backward and prefetches the unit before it; once a unit's gradients are final they
//             are reduce-scattered (averaged), the rank keeps its shard, the whole gradients and
//             the gathered parameters are freed (the reduction one unit behind, so it overlaps the
//             next unit's backward).
//   step      the optimizer updates this rank's shards in place; nothing is gathered until the
//             next forward needs it.
// Under gradient accumulation (no_sync) the whole gradients of every unit accumulate until the
// synced backward, as FSDP's no_sync() keeps them.
// hybrid_shard (FSDP's HYBRID_SHARD) is this within each node: the transport is the node's ranks,
// and `replicas` (the ranks holding the same shard on the other nodes) all-reduces each unit's
// gradient shard once the node's reduce-scatter has left it, so every replica steps the same
// average over all ranks; parameters and optimizer state never cross nodes.
// Mixed precision (FSDP's MixedPrecision param_dtype): with `param_dtype` 16-bit, each rank casts
// its float32 shard to it and the gather moves 16-bit shards (half the bytes); the gathered
// parameters are then the masters rounded to 16 bits, held in float32 for the kernels (autocast
// casts the convolutions' weights to the same 16 bits it would have rounded to). Gradients,
// reduce-scatters, master shards and optimizer state stay float32.
// Checkpoints: the parameters gathered unit by unit, copied on rank 0 only; the optimizer state
// gathered whole (full_optimizer_state), both in float32 whatever param_dtype is.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/gradient_comm.h"
#include "dist/reducer.h"
#include "nn/module.h"

namespace cg::dist {

// Which submodules (dotted name, module) are units of their own.
using UnitPolicy = std::function<bool(const std::string& name, nn::Module& module)>;

class FullShard : public Reducer {
 public:
  // `transport` carries parameters and optimizer state (float32), `bucket_comm` the gradients
  // (the transport, or the 16-bit decorator over it); both outlive this object. Installs the
  // model's forward hooks; the model's parameters move into the units' buffers (their identity
  // stays) and hold no memory between steps. Fails naming the transport when it has no shard
  // collectives. `replicas` (hybrid_shard; null otherwise) outlives it too. `param_dtype`: what
  // the forward's and backward's gathers move (f32, f16 or bf16).
  FullShard(nn::Module& model, GradientComm& transport, GradientComm& bucket_comm, const UnitPolicy& is_unit,
            GradientComm* replicas = nullptr, DType param_dtype = DType::f32);
  ~FullShard() override;
  FullShard(const FullShard&) = delete;
  FullShard& operator=(const FullShard&) = delete;

  void prepare_for_backward(bool sync) override;
  void gradient_ready(size_t param) override;
  void wait_for_gradients() override;
  void zero_grad() override;
  void start_parameter_gather() override {}  // gathered as the next forward needs them
  void wait_for_parameters() override {}
  void attach(nn::Optimizer& optimizer) override;
  nn::NamedTensors full_optimizer_state() override;
  nn::NamedTensors full_model_state(const nn::Module& model) override;
  nn::NamedTensors replicated_state(const nn::Module& model) override;
  const char* replicated_what() const override { return "buffers (the parameters are sharded, not replicated)"; }
  // hybrid_shard: the other nodes hold replicas of this rank's shards, so only the first node's
  // ranks write them into a sharded checkpoint.
  bool writes_checkpoint_shard() const override { return !replicas_ || replicas_->rank() == 0; }
  Resident resident_bytes() const override;
  std::string describe() const override;
  size_t bytes_per_step() const override;
  double modeled_ms_per_step(const GradientComm& comm) const override;
  // Has none: units take their place. Throws.
  const GradientBuckets& buckets() const override;

  // The units in forward order (the root first), for tests and timelines.
  struct UnitView {
    std::string name;  // "" for the root
    int64_t elements;  // parameter elements, whole
    int64_t gathered_bytes;  // its flat buffer, padding included, while gathered
  };
  std::vector<UnitView> units() const;
  // Since the last forward began: the order of the gathers as issued ("g<unit>"), of the units'
  // forward and backward starts ("f<unit>", "b<unit>"), of the wait for the gradients ("w") and,
  // under hybrid_shard, of the gradient shards' all-reduces across nodes ("a<unit>"): tests
  // check that a prefetch comes before the compute it hides behind, and that an all-reduce
  // across nodes starts while backward goes on.
  const std::vector<std::string>& events() const { return events_; }
  // hybrid_shard: this backward's all-reduces across nodes not yet finished (tests: they are not
  // waited for inside backward).
  size_t all_reduces_in_flight() const;

 private:
  struct Unit {
    std::string name;             // "" for the root
    std::vector<size_t> params;   // indices into params_
    std::vector<int64_t> offset;  // of each, in the flat buffer (floats)
    int64_t count = 0, padded = 0;
    int64_t lo = 0, hi = 0;       // this rank's shard: [lo, hi) of the flat buffer
    Tensor full;                  // [padded]: the parameters gathered; memory released between uses
    Tensor wire;                  // [padded] in gathered_as while a 16-bit gather travels
    DType gathered_as = DType::f32;
    Tensor shard;                 // [hi - lo]: this rank's parameters, what the optimizer updates
    Tensor grad_full;             // [padded] while gradients accumulate; undefined otherwise
    Tensor grad_shard;            // [hi - lo]: this rank's reduced gradients
    std::shared_ptr<Work> gathering, reducing;
    bool gathered = false;
    size_t pending = 0;           // gradients not yet final in this backward
  };
  void build_units(const UnitPolicy& is_unit);
  void install_hooks();
  // The unit's parameters gathered `as` f32 (the masters: checkpoints) or param_dtype_ (forward,
  // backward); a unit already gathered or on its way in another type is an error.
  void issue_gather(size_t u, DType as);
  void gather(size_t u, DType as);  // issued if not yet, then waited for
  void reshard(size_t u);   // frees the gathered parameters
  void before_forward(size_t u);
  Tensor after_forward(size_t u, const Tensor& y);
  void before_backward(size_t u);
  void unit_gradients_final(size_t u);
  void finish_reduction();  // the one in flight, if any

  nn::Module& model_;
  GradientComm& transport_;
  GradientComm& bucket_comm_;
  GradientComm* replicas_;  // hybrid_shard: the same shard on the other nodes
  DType param_dtype_;       // what gathers move
  std::vector<std::shared_ptr<Work>> replicating_;  // hybrid_shard: this backward's all-reduces across nodes
  ShardCollectives& shards_;
  nn::NamedTensors params_;  // named_parameters() order: the grad-ready hooks' indices
  Device device_;
  std::vector<std::unique_ptr<Unit>> units_;
  std::vector<size_t> unit_of_;         // param index -> unit
  std::optional<size_t> reducing_unit_;  // the unit whose reduce-scatter is in flight
  std::vector<char> ready_;             // per parameter, in the current backward
  nn::Optimizer* optimizer_ = nullptr;
  bool sync_backward_ = true, in_backward_ = false;
  std::vector<std::string> events_;
};

}  // namespace cg::dist
