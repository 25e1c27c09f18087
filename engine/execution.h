// How the ops of this thread run, as one value: the image activations' memory layout, which
// kernels each op family runs, and mixed precision. Set for a region of code by a scope, the way
// torch.autocast is, and read by every op when it is called: the training step opens one for its
// forward pass, evaluation another, both from the config. Modules carry none of it, so one model
// runs NCHW or channels-last, cuDNN or native, float32 or autocast, as the scope around it says.
// Scopes nest; each restores the context it found. The context is per thread: ranks run as
// threads in some tests, each with its own.
#pragma once
#include "engine/kernel_policy.h"
#include "util/dtype.h"
#include "util/layout.h"

namespace cg::ops {

// torch.autocast's two arguments (engine/autocast.h says what it casts).
struct Autocast {
  bool enabled = false;
  DType dtype = DType::f16;  // the half type: float16 or bfloat16
};

struct ExecutionContext {
  // Of image activations: NCHW, or channels-last NHWC (what tensor cores read best). Weights are
  // [c_out, c_in, kh, kw] either way, so checkpoints do not depend on it.
  Layout layout = Layout::nchw;
  KernelPolicy kernels{};  // the config's kernels.*
  Autocast autocast{};

  ExecutionContext with_layout(Layout l) const {
    ExecutionContext c = *this;
    c.layout = l;
    return c;
  }
  ExecutionContext with_autocast(Autocast a) const {
    ExecutionContext c = *this;
    c.autocast = a;
    return c;
  }
};

// The innermost scope's context on this thread; the defaults above outside every scope.
const ExecutionContext& execution();

class ExecutionScope {
 public:
  // Refuses an autocast dtype other than float16 or bfloat16.
  explicit ExecutionScope(const ExecutionContext& context);
  ~ExecutionScope();
  ExecutionScope(const ExecutionScope&) = delete;
  ExecutionScope& operator=(const ExecutionScope&) = delete;

 private:
  ExecutionContext previous_;
};

}  // namespace cg::ops
