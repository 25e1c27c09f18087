// Memory traffic per kernel launch (cg_emu/traffic.h). Each host thread runs one block at a time,
// so a block's accesses are logged per host thread: for every CUDA thread of the block, its loads
// and its stores in order, since the last barrier. At a barrier and when the block ends, every
// lane's requests up to there are complete, and the log is folded into warp-wide requests: the
// k-th load of each lane of a warp together (and the k-th store), costing the distinct sectors
// they touch. A launch's device allocations are looked up once, as the grid starts (none can be
// made or freed while it runs), and each carries a bit per sector, set at the first request that
// touches it, for the footprint. Totals are atomics, added once per fold.
#include "emulator/traffic_counter.h"

#include <dlfcn.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include "cg_emu/grid.h"
#include "cg_emu/traffic.h"
#include "emulator/device.h"

namespace cg_emu {
namespace {

constexpr uintptr_t kSectorBytes = 32;

struct Totals {
  std::atomic<uint64_t> requests{0}, bytes{0}, distinct{0}, sectors{0}, least{0}, footprint{0};
  MemoryTraffic value() const {
    return {requests.load(), bytes.load(), distinct.load(), sectors.load(), least.load(), footprint.load()};
  }
};

// A device allocation during one launch: what the launch asked of it, and a bit per sector for
// loads and one for stores (allocated at the first touch).
struct Region {
  uintptr_t begin = 0, end = 0;
  Totals of[2];  // loads, stores
  std::atomic<std::atomic<uint64_t>*> seen[2] = {nullptr, nullptr};
  std::unique_ptr<std::atomic<uint64_t>[]> owned[2];
};

// The grid being counted: one at a time, as grids run under the device lock. A recording opens and
// closes under that lock too, so while a grid runs, traffic_recording() says whether it is counted.
struct Launch {
  uint64_t serial = 0;
  LaunchTraffic record;
  std::vector<uintptr_t> begins;  // sorted, one per region
  std::vector<std::unique_ptr<Region>> regions;
  std::atomic<uint64_t> mma_flops{0}, static_shared{0};
  std::mutex bits_mutex;
};
Launch g_launch;
std::vector<LaunchTraffic> g_recorded;  // under the device lock

struct Access {
  uintptr_t address;
  uint32_t bytes;
  uint32_t region;
};
struct LaneLog {
  std::vector<Access> of[2];  // loads, stores
};
struct BlockLog {
  std::vector<LaneLog> lanes;
  uint64_t serial = 0;  // the launch the cache below belongs to
  uint32_t last_region = 0;
};
thread_local BlockLog g_block;

// The region holding [u, u + bytes), or -1 (not device memory: the stack, shared arrays, host).
int region_of(uintptr_t u, size_t bytes) {
  BlockLog& b = g_block;
  const auto& regions = g_launch.regions;
  if (b.serial != g_launch.serial) {
    b.serial = g_launch.serial;
    b.last_region = 0;
  }
  if (b.last_region < regions.size()) {
    const Region& r = *regions[b.last_region];
    if (u >= r.begin && u + bytes <= r.end) return int(b.last_region);
  }
  const auto it = std::upper_bound(g_launch.begins.begin(), g_launch.begins.end(), u);
  if (it == g_launch.begins.begin()) return -1;
  const size_t i = size_t(it - g_launch.begins.begin()) - 1;
  if (u + bytes > regions[i]->end) return -1;
  b.last_region = uint32_t(i);
  return int(i);
}

std::atomic<uint64_t>* sector_bits(Region& r, int kind) {
  std::atomic<uint64_t>* bits = r.seen[kind].load(std::memory_order_acquire);
  if (bits) return bits;
  std::lock_guard<std::mutex> lock(g_launch.bits_mutex);
  bits = r.seen[kind].load(std::memory_order_acquire);
  if (!bits) {
    const size_t words = (r.end - r.begin) / kSectorBytes / 64 + 2;
    r.owned[kind].reset(new std::atomic<uint64_t>[words]());
    bits = r.owned[kind].get();
    r.seen[kind].store(bits, std::memory_order_release);
  }
  return bits;
}

// Whether this is the launch's first touch of the sector.
bool first_touch(Region& r, uintptr_t sector, int kind) {
  std::atomic<uint64_t>* bits = sector_bits(r, kind);
  const uintptr_t i = sector - r.begin / kSectorBytes;
  const uint64_t bit = uint64_t(1) << (i % 64);
  return (bits[i / 64].fetch_or(bit, std::memory_order_relaxed) & bit) == 0;
}

// One lane's part of a request.
struct Piece {
  uint32_t region;
  uintptr_t begin, end;
  bool operator<(const Piece& o) const { return region != o.region ? region < o.region : begin < o.begin; }
};

// Adds one request's pieces in one region, [first, last) sorted by address, to that region: the
// bytes asked for, those asked for by one lane at least (overlaps once), the sectors they touch,
// and of those the launch's first touches.
void add_request(const Piece* first, const Piece* last, int kind) {
  Region& r = *g_launch.regions[first->region];
  uint64_t bytes = 0, distinct = 0, sectors = 0, footprint = 0;
  uintptr_t covered = 0, next_sector = 0;  // everything below these is counted already
  for (const Piece* p = first; p != last; ++p) {
    bytes += p->end - p->begin;
    if (p->end > std::max(p->begin, covered)) distinct += p->end - std::max(p->begin, covered);
    covered = std::max(covered, p->end);
    for (uintptr_t s = std::max(p->begin / kSectorBytes, next_sector); s <= (p->end - 1) / kSectorBytes; ++s) {
      ++sectors;
      footprint += first_touch(r, s, kind);
    }
    next_sector = std::max(next_sector, (p->end - 1) / kSectorBytes + 1);
  }
  Totals& t = r.of[kind];
  t.requests.fetch_add(1, std::memory_order_relaxed);
  t.bytes.fetch_add(bytes, std::memory_order_relaxed);
  t.distinct.fetch_add(distinct, std::memory_order_relaxed);
  t.sectors.fetch_add(sectors, std::memory_order_relaxed);
  t.least.fetch_add((distinct + kSectorBytes - 1) / kSectorBytes, std::memory_order_relaxed);
  t.footprint.fetch_add(footprint, std::memory_order_relaxed);
}

// Folds the lanes' logged accesses of one kind into warp-wide requests and clears them. A request
// whose lanes reach several allocations counts as one in each.
void fold(std::vector<LaneLog>& lanes, int kind) {
  std::vector<Piece> pieces;
  for (size_t w = 0; w < lanes.size(); w += 32) {
    const size_t lane_end = std::min(lanes.size(), w + 32);
    size_t longest = 0;
    for (size_t l = w; l < lane_end; ++l) longest = std::max(longest, lanes[l].of[kind].size());
    for (size_t k = 0; k < longest; ++k) {
      pieces.clear();
      for (size_t l = w; l < lane_end; ++l)
        if (const std::vector<Access>& log = lanes[l].of[kind]; k < log.size())
          pieces.push_back({log[k].region, log[k].address, log[k].address + log[k].bytes});
      std::sort(pieces.begin(), pieces.end());
      for (size_t i = 0, j; i < pieces.size(); i = j) {
        for (j = i + 1; j < pieces.size() && pieces[j].region == pieces[i].region;) ++j;
        add_request(pieces.data() + i, pieces.data() + j, kind);
      }
    }
    for (size_t l = w; l < lane_end; ++l) lanes[l].of[kind].clear();
  }
}

void fold_block() {
  fold(g_block.lanes, 0);
  fold(g_block.lanes, 1);
}

void add_to(MemoryTraffic& sum, const MemoryTraffic& m) {
  sum.requests += m.requests;
  sum.bytes += m.bytes;
  sum.distinct_bytes += m.distinct_bytes;
  sum.sectors += m.sectors;
  sum.least_sectors += m.least_sectors;
  sum.footprint_sectors += m.footprint_sectors;
}

}  // namespace

void traffic_access(const void* p, size_t bytes, bool write) {
  if (bytes == 0) return;
  const ThreadState* t = current_thread();
  if (!t || size_t(t->linear) >= g_block.lanes.size()) return;
  const auto u = reinterpret_cast<uintptr_t>(p);
  const int region = region_of(u, bytes);
  if (region < 0) return;
  g_block.lanes[size_t(t->linear)].of[write].push_back({u, uint32_t(bytes), uint32_t(region)});
}

void traffic_block_started(int threads) {
  if (!traffic_recording()) return;
  g_block.lanes.resize(size_t(threads));
  for (LaneLog& l : g_block.lanes) l.of[0].clear(), l.of[1].clear();
}

void traffic_barrier_passed() {
  if (traffic_recording()) fold_block();
}

void traffic_block_finished(size_t static_shared_bytes) {
  if (!traffic_recording()) return;
  fold_block();
  uint64_t seen = g_launch.static_shared.load();
  while (seen < static_shared_bytes && !g_launch.static_shared.compare_exchange_weak(seen, static_shared_bytes)) {
  }
}

void traffic_grid_started(const char* name, const void* entry, dim3 grid, dim3 block, size_t dynamic_shared_bytes) {
  Launch& l = g_launch;
  l.serial++;
  l.record = LaunchTraffic{};
  l.record.kernel = name;
  if (Dl_info where{}; dladdr(entry, &where) != 0 && where.dli_fname) {
    l.record.entry_object = where.dli_fname;
    l.record.entry_offset = reinterpret_cast<uintptr_t>(entry) - reinterpret_cast<uintptr_t>(where.dli_fbase);
  }
  l.record.grid = grid;
  l.record.block = block;
  l.record.dynamic_shared_bytes = dynamic_shared_bytes;
  l.begins.clear();
  l.regions.clear();
  for (const auto& [begin, bytes] : device_allocations()) {  // sorted by address
    auto r = std::make_unique<Region>();
    r->begin = begin;
    r->end = begin + bytes;
    l.begins.push_back(begin);
    l.regions.push_back(std::move(r));
  }
  l.mma_flops = 0;
  l.static_shared = 0;
}

void traffic_grid_finished() {
  Launch& l = g_launch;
  if (!traffic_recording()) return;
  for (const auto& r : l.regions) {
    const MemoryTraffic loads = r->of[0].value(), stores = r->of[1].value();
    if (loads.requests == 0 && stores.requests == 0) continue;
    l.record.by_allocation.push_back({r->begin, r->end - r->begin, loads, stores});
    add_to(l.record.loads, loads);
    add_to(l.record.stores, stores);
  }
  l.record.mma_flops = l.mma_flops.load();
  l.record.static_shared_bytes = l.static_shared.load();
  g_recorded.push_back(std::move(l.record));
  l.regions.clear();
  l.begins.clear();
}

void count_mma_flops(uint64_t flops) {
  if (traffic_recording()) g_launch.mma_flops += flops;
}

void start_traffic_recording() {
  CG_EMU_LOCK;
  if (g_traffic_recording) throw std::logic_error("cg_emu::start_traffic_recording: a recording is open already");
  g_recorded.clear();
  g_traffic_recording = true;
}

std::vector<LaunchTraffic> stop_traffic_recording() {
  CG_EMU_LOCK;
  drive_all();  // grids queued before the call run, and count, now
  g_traffic_recording = false;
  std::vector<LaunchTraffic> launches = std::move(g_recorded);
  g_recorded.clear();
  return launches;
}

bool traffic_hooks_built() { return CG_EMU_TRAFFIC_HOOKS != 0; }

}  // namespace cg_emu
