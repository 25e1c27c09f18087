// What the emulated GPU has been asked to do since the process started, for tests that count one
// training step's work (issue 37 item 4: kernels per step, and no host waits inside a step).
// Counted when asked for, not when run: a kernel queued on a stream counts at its launch, as a
// profiler's launch count does. cuDNN and cuBLAS are not emulated, so a real GPU's count for the
// same step adds their kernels.
#pragma once
#include <cstdint>
#include <map>
#include <string>

namespace cg_emu {

struct Counters {
  uint64_t kernels = 0;     // grids launched, or recorded into a CUDA graph (a replay adds none)
  uint64_t host_waits = 0;  // calls that block the host on device work: stream, event and device
                            // synchronizations, cudaMemcpy
  uint64_t host_polls = 0;  // cudaStreamQuery and cudaEventQuery (the host asks, does not wait)
};

Counters counters();
// Kernels launched (or recorded) so far, by kernel name.
std::map<std::string, uint64_t> kernels_by_name();

}  // namespace cg_emu
