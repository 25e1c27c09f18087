// The emulated device's execution model: a grid of blocks, each block a set of CUDA threads run as
// fibers on one host thread (so __syncthreads and warp shuffles can suspend a thread until its
// peers arrive), blocks spread over a pool of host threads. Device code reaches its own thread's
// state through current_thread(); the scheduler sets it before resuming each fiber.
#pragma once
#include <vector_types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace cg_emu {

struct Block;

// One CUDA thread: its coordinates and the block it belongs to.
struct ThreadState {
  uint3 thread_idx;
  uint3 block_idx;
  dim3 block_dim;
  dim3 grid_dim;
  int linear;  // threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)
  Block* block;
};

// The thread being run on this host thread (null outside a kernel). Inline: every threadIdx
// read goes through it.
inline thread_local ThreadState* g_current = nullptr;
inline ThreadState* current_thread() { return g_current; }

// Counts the blocks this host thread has started (from 1): a shared array declared with CG_SHARED
// remembers the count it was last reached at, so the first thread of each block to reach its
// declaration registers it and the others leave it alone.
inline thread_local uint64_t g_block_serial = 0;
// A CG_SHARED array reached in a new block (emulator/shared_checker.cpp): filled with 0xFF bytes
// (a device's shared memory holds garbage when a block starts; this one would hold the previous
// block's values), and registered with the guard zones on either side, [before, array) and
// [array + bytes, after_end), for the bounds and race checks.
void shared_array_reached(const char* name, void* array, size_t bytes, const void* before, const void* after_end,
                          uint64_t& reached_at);
constexpr size_t kSharedGuardBytes = 64;

// The body every CUDA thread of a grid runs: fn(closure).
struct KernelBody {
  void (*fn)(const void* closure);
  const void* closure;
};

// Runs the grid to completion. Throws KernelFault (below) when a thread throws, when threads of a
// block wait at barriers that can never all be reached (divergent __syncthreads), or on a launch
// configuration a real device refuses (checked earlier by check_launch).
// reverse: run each block's threads in reverse order between barriers (reverse_schedule()).
void run_grid(dim3 grid, dim3 block, KernelBody body, const char* kernel_name, bool reverse);
// CG_EMU_SCHEDULE, read at every launch (a test may switch it): "forward" (the default) or
// "reverse"; anything else throws std::invalid_argument naming it.
bool reverse_schedule();

// "" when a device accepts this configuration, else the reason (too many threads per block...).
std::string check_launch(dim3 grid, dim3 block, size_t dynamic_shared_bytes);

struct KernelFault {
  std::string message;
};

// Device-side synchronization, called through the CUDA names in cuda_emulation.h.
void block_barrier();  // __syncthreads
// A fault found by device code (a shuffle outside its mask...): kept as the block's first fault,
// which ends the launch once the calling thread next stops. Not thrown: an exception unwinding a
// thread's fiber stack is what AddressSanitizer cannot follow (scripts/sanitize.sh emu).
void report_kernel_fault(std::string message);
// The lanes of `mask` in the calling thread's warp that have not exited; a thread outside its own
// mask faults, as the device leaves that undefined.
void warp_barrier(unsigned mask = 0xffffffffu);
// The calling warp's exchange slots: 32 lanes x 16 bytes, and a scratch area shared by the warp
// (WMMA gathers its fragments there). Both are valid between two warp_barrier calls.
unsigned char* warp_slots();
float* warp_scratch();  // kWarpScratchFloats floats
constexpr int kWarpScratchFloats = 3 * 256;

// Host threads that run blocks concurrently (CUDAGRAD_EMULATION_THREADS, default: the cores).
int worker_count();

}  // namespace cg_emu
