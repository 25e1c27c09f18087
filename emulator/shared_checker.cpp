// Shared-memory bounds and races between barriers (shared_checker.h). Each host thread runs one
// block at a time, so the state is per host thread: the block's registered arrays, and a shadow
// cell per byte of them saying who wrote and who read it since the last barrier. A cell is
// stamped with the epoch (a counter bumped at each block start and each barrier) it was last
// touched in; an older stamp means untouched, so nothing is cleared between barriers.
#include "emulator/shared_checker.h"

#include <fmt/format.h>

#include <cstdint>
#include <vector>

#include "cg_emu/grid.h"

namespace cg_emu {
namespace {

struct Array {
  const char* name;
  uintptr_t lo, begin, end, hi;  // guard [lo, begin), the array [begin, end), guard [end, hi)
  size_t first_cell;
};

struct Cell {
  uint32_t epoch = 0;
  int32_t writer = -1, reader = -1;       // threads (linear index), -1: none since the barrier
  uint32_t writer_sync = 0, reader_sync = 0;  // their warp's operation count at the access
  bool many_readers = false;
};

struct Checker {
  std::vector<Array> arrays;
  uintptr_t lo = UINTPTR_MAX, hi = 0;  // every registered array with its guards lies within
  std::vector<Cell> cells;
  size_t cells_used = 0;
  uint32_t epoch = 1;
  uint32_t warp_syncs[32] = {};  // per warp of the block: warp operations completed
};

thread_local Checker g_checker;

// Lanes of one warp are ordered by a warp operation between their two accesses.
bool ordered(const Checker& c, int32_t me, int32_t other, uint32_t other_sync) {
  return other == me || (other / 32 == me / 32 && c.warp_syncs[me / 32] > other_sync);
}

void check_byte(Checker& c, const Array& a, size_t offset, bool write, int32_t me) {
  Cell& x = c.cells[a.first_cell + offset];
  if (x.epoch != c.epoch) x = Cell{c.epoch};
  const uint32_t sync = c.warp_syncs[me / 32];
  auto race = [&](int32_t other, const char* theirs) {
    report_kernel_fault(fmt::format("a race on shared array '{}', byte {}: thread {} {} it after thread {} {} it between "
                          "the same two barriers (no __syncthreads, warp operation or atomic orders them)",
                          a.name, offset, me, write ? "wrote" : "read", other, theirs));
  };
  if (x.writer >= 0 && !ordered(c, me, x.writer, x.writer_sync)) race(x.writer, "wrote");
  if (write) {
    if (x.reader >= 0 && (x.many_readers || !ordered(c, me, x.reader, x.reader_sync))) race(x.reader, "read");
    x.writer = me;
    x.writer_sync = sync;
  } else if (x.reader < 0 || x.reader == me) {
    x.reader = me;
    x.reader_sync = sync;
  } else {
    x.many_readers = true;
  }
}

}  // namespace

void shared_access(const void* p, size_t bytes, bool write) {
  const ThreadState* t = current_thread();
  Checker& c = g_checker;
  const auto u = reinterpret_cast<uintptr_t>(p);
  if (!t || u + bytes <= c.lo || u >= c.hi) return;
  for (const Array& a : c.arrays) {
    if (u + bytes <= a.lo || u >= a.hi) continue;
    if (u < a.begin || u + bytes > a.end) {
      report_kernel_fault(fmt::format("thread {} {} {} bytes at byte {} of shared array '{}', which has {}: out of bounds",
                            t->linear, write ? "wrote" : "read", bytes, long(u) - long(a.begin), a.name,
                            a.end - a.begin));
      return;
    }
    for (size_t i = 0; i < bytes; ++i) check_byte(c, a, u - a.begin + i, write, t->linear);
    return;
  }
}

void shared_array_reached(const char* name, void* array, size_t bytes, const void* before, const void* after_end,
                          uint64_t& reached_at) {
  if (reached_at == g_block_serial) return;
  reached_at = g_block_serial;
  __builtin_memset(array, 0xFF, bytes);  // garbage, as a device's shared memory holds when a block starts
  Checker& c = g_checker;
  const Array a{name, reinterpret_cast<uintptr_t>(before), reinterpret_cast<uintptr_t>(array),
                reinterpret_cast<uintptr_t>(array) + bytes, reinterpret_cast<uintptr_t>(after_end), c.cells_used};
  c.arrays.push_back(a);
  c.cells_used += bytes;
  if (c.cells.size() < c.cells_used) c.cells.resize(c.cells_used);
  c.lo = std::min(c.lo, a.lo);
  c.hi = std::max(c.hi, a.hi);
}

void shared_block_started() {
  Checker& c = g_checker;
  c.arrays.clear();
  c.lo = UINTPTR_MAX;
  c.hi = 0;
  c.cells_used = 0;
  shared_barrier_passed();
  for (uint32_t& s : c.warp_syncs) s = 0;
}

void shared_barrier_passed() {
  Checker& c = g_checker;
  if (++c.epoch == 0) {  // wrapped: no cell may keep a stamp that looks current
    for (Cell& x : c.cells) x.epoch = 0;
    c.epoch = 1;
  }
}

void shared_warp_synced(int warp) { g_checker.warp_syncs[warp]++; }

size_t shared_bytes_declared() { return g_checker.cells_used; }

}  // namespace cg_emu
