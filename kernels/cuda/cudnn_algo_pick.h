// Which of cuDNN's convolution candidates to run (kernels/cuda/cudnn_conv.cpp): its Find and Get
// calls list them fastest first, each with a status and whether it is deterministic. A separate
// header so the rule is tested without a GPU (tests/kernels/cuda/cudnn_algo_pick_test.cpp).
#pragma once
#include <cudnn.h>

namespace cg::kernels::cuda {

// The index of the first candidate that ran (CUDNN_STATUS_SUCCESS) and, when `deterministic`,
// gives the same bits run to run; -1 when none does. The backward algorithms that add with atomics
// (backward-data algo 0, backward-filter algos 0 and 3) are the non-deterministic ones cuDNN
// picks for small channel counts: on the H200 one was the fastest for the stem's weight gradient.
template <typename Perf>
int pick_algorithm(const Perf* perf, int count, bool deterministic) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
    return i;
  }
  return -1;
}

}  // namespace cg::kernels::cuda
