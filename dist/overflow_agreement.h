// Mixed precision under data parallelism: every rank's GradScaler skips a step when any rank's
// gradients overflowed, so the replicas stay equal. The ranks' found_inf flags are averaged over
// the transport in float32 (never compressed), in stream order: no host wait with NCCL.
#pragma once
#include "dist/gradient_comm.h"
#include "nn/grad_scaler.h"

namespace cg::dist {

// From now on `scaler` decides on overflow with every rank over `comm`, which must outlive the
// scaler's steps.
void agree_on_overflow(nn::GradScaler& scaler, GradientComm& comm);

}  // namespace cg::dist
