// What each kernel launch asks of device memory on the emulated GPU (issue 37 item 6: a
// performance model that runs without a GPU). While a recording is open, every global-memory load
// and store of the instrumented kernels (the checked library, cmake/Emulation.cmake) is counted as
// a device's memory system sees it: the k-th access of each lane of a warp, taken together, is one
// warp-wide request (one per allocation its lanes reach), and the request costs the distinct
// 32-byte sectors its lanes touch. The fewest sectors the request's bytes could lie in, over the
// sectors it touched, is its coalescing (MemoryTraffic::efficiency). The sectors no earlier request
// of the same launch touched are the launch's footprint: what it must move from DRAM at least,
// with an L2 that keeps everything.
//
// Counted: plain and vector loads and stores to device allocations (cudaMalloc), global memory
// only. Not counted: shared memory, atomics (they are performed at L2, not through the sectors
// above), the kernel's parameters and locals, host memory mapped into the device. A lane's k-th
// access is matched with the other lanes' k-th, whatever instruction each came from: exact for the
// straight-line and uniformly looping code of these kernels, an estimate where lanes diverge.
// Counts are a function of the kernel and its launch alone: deterministic, whatever the host
// threads or the block order.
#pragma once
#include <vector_types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cg_emu {

struct MemoryTraffic {
  uint64_t requests = 0;  // warp-wide accesses
  uint64_t bytes = 0;     // bytes the lanes asked for
  uint64_t distinct_bytes = 0;  // of them, per request, those no other lane of it asked for too
  uint64_t sectors = 0;   // 32-byte sectors those requests touched, counted per request
  uint64_t least_sectors = 0;  // the fewest each request could have touched: its distinct bytes / 32, rounded up
  uint64_t footprint_sectors = 0;  // distinct sectors over the launch
  // The sectors the requests needed per sector they touched: 1 when coalesced (a warp's 32
  // floats side by side, or every lane reading one float: a broadcast is one sector), 1/8 when
  // each lane's float sits in a sector of its own.
  double efficiency() const { return sectors == 0 ? 1.0 : double(least_sectors) / double(sectors); }
};

// One device allocation's part of a launch's traffic.
struct AllocationTraffic {
  uintptr_t address = 0;  // as cudaMalloc returned it
  uint64_t bytes = 0;
  MemoryTraffic loads, stores;
};

struct LaunchTraffic {
  std::string kernel;  // the name its launch gave (kernels/cuda/launch.h)
  // The kernel function: the file it was loaded from and its offset there, which the file's symbol
  // table turns into the instantiation's full name (`nm -C`; scripts/perf_model.py does).
  std::string entry_object;
  uint64_t entry_offset = 0;
  dim3 grid, block;
  uint64_t dynamic_shared_bytes = 0;
  uint64_t static_shared_bytes = 0;  // the CG_SHARED arrays one block declares (the largest block)
  MemoryTraffic loads, stores;  // over every allocation
  std::vector<AllocationTraffic> by_allocation;  // those the launch touched, by address
  uint64_t mma_flops = 0;  // 2 M N K per warp-wide WMMA mma_sync
  uint64_t blocks() const { return uint64_t(grid.x) * grid.y * grid.z; }
  uint64_t threads_per_block() const { return uint64_t(block.x) * block.y * block.z; }
};

// Opens a recording: launches that run from now on are counted. Throws std::logic_error if one is
// open already. Launches queued before and run after the call are counted too: what counts is when
// a grid runs, as a profiler measures it.
void start_traffic_recording();
// Closes the recording and returns its launches in the order they ran.
std::vector<LaunchTraffic> stop_traffic_recording();

// Whether the access hooks that feed the counts are in this build (the checked kernels of an
// emulated build with CUDAGRAD_EMU_ACCESS_CHECKS=ON). Kernels compiled without the instrumentation
// run as usual and count nothing.
bool traffic_hooks_built();

// Device side: a warp's WMMA mma_sync of an M x N x K tile adds 2 M N K (emulator/include/mma.h).
void count_mma_flops(uint64_t flops);

}  // namespace cg_emu
