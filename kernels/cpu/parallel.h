// How CPU kernels split work across OpenMP threads without giving up determinism: work is cut
// into chunks whose boundaries depend only on the problem size, never on the thread count, and
// any reduction across chunks is summed in chunk order. So 1 thread and 16 threads produce
// bit-identical results, which the resume test relies on.
#pragma once
#include <algorithm>
#include <cstdint>

namespace cg::kernels::cpu {

// Calls body(begin, end) for consecutive ranges of [0, n) of at most `grain` elements, in
// parallel. Ranges are independent, so the result does not depend on scheduling.
template <typename F>
void parallel_for(int64_t n, int64_t grain, F&& body) {
  const int64_t chunks = (n + grain - 1) / grain;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) body(c * grain, std::min(n, (c + 1) * grain));
}

// Elementwise kernels take chunks of this many elements: large enough to amortize the
// parallel-region start, small enough to balance 2 to 16 cores on activation-sized arrays.
constexpr int64_t kElementwiseGrain = 1 << 15;

}  // namespace cg::kernels::cpu
