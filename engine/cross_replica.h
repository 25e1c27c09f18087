// The hook through which a batch-norm layer combines its per-channel statistics with the other
// replicas of a data-parallel job (SyncBatchNorm). The engine only declares it: dist/ implements it
// over the job's communication (engine < nn < dist, so the op cannot call dist itself), and
// nn::BatchNorm2d carries one when DDP's sync_batch_norm attaches it.
#pragma once
#include "engine/tensor.h"

namespace cg {

class CrossReplicaSum {
 public:
  enum class Pass { forward, backward };
  virtual ~CrossReplicaSum() = default;
  // Replaces `values` (a contiguous float64 tensor on the layer's device) by its elementwise sum
  // over all replicas; every replica calls it with the same number of values, in the same order
  // of layers. On the GPU it is enqueued in stream order: it starts after the work enqueued so far
  // on the current stream, which then waits for it; the host does not wait. The result is
  // bit-identical on every replica. `pass` names the collective in errors and timelines.
  virtual void sum(Tensor& values, Pass pass) = 0;
};

}  // namespace cg
