// Which of cuDNN's convolution candidates to run (kernels/cuda/cudnn_conv.cpp): its Find and Get
// calls list them fastest first, each with a status and whether it is deterministic. A separate
// header so the rule is tested without a GPU (tests/kernels/cuda/cudnn_algo_pick_test.cpp).
#pragma once
#include <cudnn.h>

#include <vector>

namespace cg::kernels::cuda {

// The index of the first candidate that ran (CUDNN_STATUS_SUCCESS) and, when `deterministic`,
// gives the same bits run to run; -1 when none does. The backward algorithms that add with atomics
// (backward-data algo 0, backward-filter algos 0 and 3) are the non-deterministic ones cuDNN
// picks for small channel counts: on the H200 one was the fastest for the stem's weight gradient.
template <typename Perf>
bool admitted(const Perf& p, bool deterministic) {
  return p.status == CUDNN_STATUS_SUCCESS && (!deterministic || p.determinism == CUDNN_DETERMINISTIC);
}

template <typename Perf>
int pick_algorithm(const Perf* perf, int count, bool deterministic) {
  for (int i = 0; i < count; ++i)
    if (admitted(perf[i], deterministic)) return i;
  return -1;
}

// The indices of the first `most` candidates the rule admits, in cuDNN's order: those the timed
// search times again (cudnn_conv.cpp), since Find times each candidate once and its order moved
// between two processes on the H200 (one layer's pick: 0.715 ms in one, 0.115 in the next).
template <typename Perf>
std::vector<int> admitted_algorithms(const Perf* perf, int count, bool deterministic, int most) {
  std::vector<int> out;
  for (int i = 0; i < count && int(out.size()) < most; ++i)
    if (admitted(perf[i], deterministic)) out.push_back(i);
  return out;
}

}  // namespace cg::kernels::cuda
