// What the emulated device checks on every access to a block's shared memory (the accesses come
// from the instrumented kernels through access_hooks.cpp; the arrays from CG_SHARED, which
// registers each one, with a guard zone on either side, the first time a block reaches it):
// - bounds: an access in an array's guard zones is out of bounds of that array;
// - races: a byte written by one thread and read or written by another between the same two
//   barriers, with no warp operation ordering them when both are lanes of one warp, is a race.
//   The emulator runs each thread from barrier to barrier without preemption, so such a race
//   (`s[0] += v` without an atomic) gives the right answer in any order it could pick; a device
//   interleaves the threads, and it does not.
// Atomics are not checked. A finding goes to report_kernel_fault (the block's first fault, ending
// the launch when the thread next stops), naming the array, the byte and both threads.
#pragma once
#include <cstddef>

namespace cg_emu {

void shared_access(const void* p, size_t bytes, bool write);  // every plain load and store

// grid.cpp's events, on the host thread that runs the block.
void shared_block_started();    // a new block: no arrays registered, every byte unwritten
void shared_barrier_passed();   // __syncthreads released the block
void shared_warp_synced(int warp);  // a warp operation released these lanes
size_t shared_bytes_declared();     // the block's CG_SHARED arrays so far, guards left out

}  // namespace cg_emu
