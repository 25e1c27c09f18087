// Optimizers with torch.optim's semantics: SGD (momentum, dampening, nesterov, weight decay
// added to the gradient) and AdamW (decoupled weight decay, bias-corrected moments). The learning
// rate is passed to every step() by the caller's schedule, so the optimizer holds no schedule.
// Parameters whose .grad is undefined are skipped, like PyTorch's `p.grad is None`.
// On the CPU each parameter is updated by its own kernel call; on the GPU the whole list goes to
// one multi-tensor launch (engine/optim_ops.h), which can be told to skip itself on the device
// (found_inf) so a mixed-precision step never waits for the host.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "engine/optim_ops.h"
#include "nn/module.h"
#include "util/optim_options.h"

namespace cg::nn {

// The hyperparameters (SgdOptions, AdamWOptions) are util/optim_options.h's, the kernels' too.
class Optimizer {
 public:
  explicit Optimizer(NamedTensors params) : params_(std::move(params)) {}
  virtual ~Optimizer() = default;

  // found_inf (GPU only, may be undefined): a one-element float32 tensor on the parameters'
  // device; when it holds a non-zero value the kernels leave every parameter and state untouched.
  void step(double lr, const Tensor& found_inf = Tensor());
  void zero_grad();  // set_to_none: frees the gradients
  int64_t steps_taken() const { return steps_; }  // step() calls, skipped ones included
  // For steps run by replaying a CUDA graph, whose host code (and step()'s count) ran only once,
  // at capture.
  void set_steps_taken(int64_t steps) { steps_ = steps; }

  // CUDA graphs (GPU parameters only): from the first call on, GPU steps read the learning rate
  // from a device float32 that this writes in stream order on the current stream, and ignore
  // step()'s `lr`. Call it before each replay, outside the graph, and once before the capture
  // (the scalar must not be allocated inside it). The same float reaches the kernels as through
  // step(lr), so results are bit-identical.
  void set_device_lr(double lr);

  // Everything a resumed run needs, as named tensors ("<state>.<param name>") plus the count of
  // steps taken. The tensors live where the parameters do; loading moves them there. Loading
  // checks everything before it keeps anything (the state comes from a file, so from anyone):
  // every name is "<one of state_kinds()>.<one of the parameters>", every element-wise buffer
  // float32 of its parameter's shape, every step counter a float32 scalar holding a whole number
  // in [0, 2^24], steps_taken >= 0; otherwise it throws naming the tensor and keeps the old state.
  // A missing tensor is allowed: that parameter had no gradient yet when the state was saved.
  virtual NamedTensors state_tensors() const;
  virtual void load_state_tensors(const std::map<std::string, Tensor>& state, int64_t steps_taken);
  // "sgd" | "adamw": what checkpoints record as the optimizer that wrote them.
  virtual const char* name() const = 0;

  // Sharded data parallelism (dist.sharding, dist/sharding.h): from now on step() updates only
  // `slices`, each the elements [range.begin, range.begin + range.count) of the flattened parameter
  // `name`, given as 1-D views of that parameter (`param`) and of the gradient to step it with
  // (`grad`: under SHARD_GRAD_OP not the parameter's own .grad, which is freed between steps), and
  // keeps that parameter's element-wise state for those elements only (1-D, `count` long);
  // parameters without a slice are left alone and hold no state. State already held for whole
  // parameters (a loaded checkpoint, earlier steps) is cut down to the slices, and so is state
  // loaded later. Each element's update is the unsharded arithmetic (the kernels are
  // element-wise), so a sharded step changes the elements it owns bit-identically. Called again,
  // the new slices replace the old. state_tensors() then returns the shards; a checkpoint needs
  // them gathered first (dist/reducer.h, full_optimizer_state).
  struct Range {
    int64_t begin = 0, count = 0;
  };
  struct Slice {
    std::string name;
    Range range;
    Tensor param, grad;
  };
  void shard(std::vector<Slice> slices);
  bool sharded() const { return sharded_; }
  const std::map<std::string, Range>& shard_ranges() const { return ranges_; }
  const std::vector<Slice>& slices() const { return slices_; }  // when sharded: what step() updates
  // The gradients step() would use now, named by parameter: every defined .grad, or (sharded)
  // the slices' (what a GradScaler unscales and checks).
  NamedTensors gradients() const;
  // The per-parameter state this optimizer keeps ("momentum_buffer"; AdamW: "exp_avg", ...).
  std::vector<std::string> state_kinds() const { return state_names(); }
  // Bytes of state held now (every state tensor, GPU step counters aside).
  int64_t state_bytes() const;

 protected:
  struct Entry {  // a parameter with a gradient in this step, and its state buffers
    const std::string* name;
    Tensor* param;
    Tensor grad;
    std::map<std::string, Tensor>* state;
  };
  // Updates one parameter on the CPU; `state` holds the per-parameter buffers (created here on
  // first use, as PyTorch does lazily).
  virtual void update(const std::string& name, Tensor& param, const Tensor& grad, double lr,
                      std::map<std::string, Tensor>& state) = 0;
  // Updates every entry on the GPU in as few launches as possible.
  virtual void update_gpu(std::vector<Entry>& entries, double lr, const Tensor& found_inf) = 0;
  // Names of the per-parameter state buffers this optimizer keeps ("momentum_buffer").
  virtual std::vector<std::string> state_names() const = 0;
  // Whether state `state_name` is a per-parameter step counter (a scalar) rather than a buffer
  // shaped like its parameter.
  virtual bool is_counter(const std::string& state_name) const { return false; }

  // Cuts per_param_'s whole-parameter tensors down to ranges_ and drops unowned parameters' state.
  void cut_state_to_shard();

  NamedTensors params_;
  bool sharded_ = false;
  std::map<std::string, Range> ranges_;  // when sharded_: the owned elements of each parameter
  std::vector<Slice> slices_;            // when sharded_: what step() updates
  // per_param_[param name][state name]
  std::map<std::string, std::map<std::string, Tensor>> per_param_;
  int64_t steps_ = 0;
  Tensor device_lr_;  // float32 [] once set_device_lr() was called
};

class SGD : public Optimizer {
 public:
  SGD(NamedTensors params, const SgdOptions& hyper);
  const char* name() const override { return "sgd"; }

 protected:
  void update(const std::string& name, Tensor& param, const Tensor& grad, double lr,
              std::map<std::string, Tensor>& state) override;
  void update_gpu(std::vector<Entry>& entries, double lr, const Tensor& found_inf) override;
  std::vector<std::string> state_names() const override;

 private:
  SgdOptions hyper_;
};

class AdamW : public Optimizer {
 public:
  AdamW(NamedTensors params, const AdamWOptions& hyper);
  const char* name() const override { return "adamw"; }
  // On the GPU the step count is one device counter for all parameters (advanced unless
  // found_inf); it is written out as every parameter's "step" like the CPU's per-parameter ones.
  NamedTensors state_tensors() const override;
  void load_state_tensors(const std::map<std::string, Tensor>& state, int64_t steps_taken) override;

 protected:
  void update(const std::string& name, Tensor& param, const Tensor& grad, double lr,
              std::map<std::string, Tensor>& state) override;
  void update_gpu(std::vector<Entry>& entries, double lr, const Tensor& found_inf) override;
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq", "step"}; }
  bool is_counter(const std::string& state_name) const override { return state_name == "step"; }

 private:
  AdamWOptions hyper_;
  Tensor device_step_;  // int64 [] on the GPU, once a GPU step ran or state was loaded there
};

}  // namespace cg::nn
