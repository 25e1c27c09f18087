// The emulated device's side of cg_emu/traffic.h: the per-access entry point the instrumented
// kernels reach through access_hooks.cpp, and the events of grid.cpp and runtime_streams.cpp that
// delimit blocks, barriers and grids. Every call is cheap when no recording is open.
#pragma once
#include <vector_types.h>

#include <atomic>
#include <cstddef>

namespace cg_emu {

inline std::atomic<bool> g_traffic_recording{false};
inline bool traffic_recording() { return g_traffic_recording.load(std::memory_order_relaxed); }

// A plain load or store of `bytes` at p by the running thread, while a recording is open (ignored
// unless p lies in a device allocation).
void traffic_access(const void* p, size_t bytes, bool write);

// On the host thread that runs the block.
void traffic_block_started(int threads);
void traffic_barrier_passed();  // __syncthreads released the block: every lane's requests so far are complete
void traffic_block_finished(size_t static_shared_bytes);

// On the host thread that runs the grid, under the device lock.
void traffic_grid_started(const char* name, const void* entry, dim3 grid, dim3 block, size_t dynamic_shared_bytes);
void traffic_grid_finished();

}  // namespace cg_emu
