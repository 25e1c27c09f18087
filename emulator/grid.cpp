// Running a grid: blocks go to a pool of host threads; within a block every CUDA thread is a
// Boost.Context fiber with its own stack, run in thread order until it finishes or waits at a
// barrier. A barrier releases once every thread of its group that has not exited waits at it, so
// a write before __syncthreads is seen by every read after it, and a missing barrier shows: thread
// 0 runs ahead of the others and reads what they have not written yet. With CG_EMU_SCHEDULE=reverse
// the threads run in reverse order instead, so a read of what a lower thread writes between the
// same two barriers shows too: the two orders together catch a shared-memory race in either
// direction (what compute-sanitizer's racecheck reports), as a result that differs from the
// reference.
#include "cg_emu/grid.h"

#include <sys/mman.h>

#include <atomic>
#include <boost/context/fiber.hpp>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <functional>
#include <fmt/format.h>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "emulator/shared_checker.h"
#include "emulator/traffic_counter.h"

namespace cg_emu {
namespace ctx = boost::context;

namespace {

// Room for a kernel's locals (fragments, unrolled tiles) and the calls it makes; a guard page
// below each stack turns an overflow into a fault instead of silent corruption.
constexpr size_t kStackBytes = 256 * 1024;
constexpr size_t kGuardBytes = 4096;

// Stacks for the threads of a block, mapped once per host thread and reused by every block it
// runs (untouched pages cost nothing).
class StackPool {
 public:
  ~StackPool() {
    for (char* s : stacks_) munmap(s, kStackBytes + kGuardBytes);
  }
  char* stack(size_t i) {
    while (stacks_.size() <= i) {
      void* p = mmap(nullptr, kStackBytes + kGuardBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
      if (p == MAP_FAILED) throw KernelFault{"emulator: could not map a thread stack"};
      mprotect(p, kGuardBytes, PROT_NONE);
      stacks_.push_back(static_cast<char*>(p));
    }
    return stacks_[i];
  }

 private:
  std::vector<char*> stacks_;
};

// Boost.Context's stack-allocator interface over one preallocated stack.
struct FixedStack {
  char* base;
  ctx::stack_context allocate() {
    ctx::stack_context sc;
    sc.size = kStackBytes;
    sc.sp = base + kGuardBytes + kStackBytes;  // stacks grow down
    return sc;
  }
  void deallocate(ctx::stack_context&) noexcept {}
};

enum class Status { ready, at_block_barrier, at_warp_barrier, done };

struct Lane {
  ThreadState state;
  Status status = Status::ready;
  uint32_t warp_group = 0;  // at a warp barrier: the lanes it waits for (the operation's mask)
  ctx::fiber fiber;      // this thread, while suspended
  ctx::fiber scheduler;  // the block's scheduler, while this thread runs
};

struct Warp {
  uint32_t live = 0, arrived = 0;  // a bit per lane: not exited; waiting at a warp barrier
  alignas(16) unsigned char slots[32 * 16];
  float scratch[kWarpScratchFloats];
};

}  // namespace

struct Block {
  std::vector<Lane> lanes;
  std::vector<Warp> warps;
  int live = 0, waiting = 0;  // threads not exited; of them, those at __syncthreads
  Lane* running = nullptr;
  std::string fault;
};

namespace {

void suspend(Lane& lane) { lane.scheduler = std::move(lane.scheduler).resume(); }

Lane& running_lane() {
  ThreadState* t = current_thread();
  if (!t) throw KernelFault{"emulator: a device function was called outside a kernel"};
  return *t->block->running;
}

// Sets up the block's threads for one run; lanes and warps are reused across blocks.
void prepare(Block& b, dim3 grid, dim3 block, uint3 block_idx) {
  ++g_block_serial;  // a new block: its CG_SHARED arrays are poisoned and registered again (grid.h)
  shared_block_started();
  const int n = int(block.x * block.y * block.z);
  traffic_block_started(n);
  b.lanes.resize(size_t(n));
  b.warps.resize(size_t((n + 31) / 32));
  for (Warp& w : b.warps) w.live = w.arrived = 0;
  for (int i = 0; i < n; ++i) {
    Lane& l = b.lanes[size_t(i)];
    l.status = Status::ready;
    l.state.linear = i;
    l.state.thread_idx = {unsigned(i) % block.x, unsigned(i) / block.x % block.y, unsigned(i) / (block.x * block.y)};
    l.state.block_idx = block_idx;
    l.state.block_dim = block;
    l.state.grid_dim = grid;
    l.state.block = &b;
    b.warps[size_t(i / 32)].live |= 1u << (i % 32);
  }
  b.live = n;
  b.waiting = 0;
  b.fault.clear();
}

// Lets every thread of a barrier's group go on once all of its live threads wait there.
bool release_barriers(Block& b) {
  bool released = false;
  if (b.waiting > 0 && b.waiting == b.live) {
    for (Lane& l : b.lanes)
      if (l.status == Status::at_block_barrier) l.status = Status::ready;
    b.waiting = 0;
    shared_barrier_passed();
    traffic_barrier_passed();
    released = true;
  }
  // A warp operation goes on once every lane of its mask that has not exited is there.
  for (size_t w = 0; w < b.warps.size(); ++w) {
    Warp& warp = b.warps[w];
    for (size_t i = w * 32; warp.arrived != 0 && i < std::min(b.lanes.size(), w * 32 + 32); ++i) {
      const Lane& l = b.lanes[i];
      const uint32_t group = l.warp_group & warp.live;
      if (l.status != Status::at_warp_barrier || (warp.arrived & group) != group) continue;
      for (size_t k = w * 32; k < std::min(b.lanes.size(), w * 32 + 32); ++k)
        if ((group >> (k % 32) & 1u) && b.lanes[k].status == Status::at_warp_barrier) b.lanes[k].status = Status::ready;
      warp.arrived &= ~group;
      shared_warp_synced(int(w));
      released = true;
    }
  }
  return released;
}

std::string describe_stall(const Block& b) {
  int at_block = 0, at_warp = 0, done = 0;
  for (const Lane& l : b.lanes) {
    at_block += l.status == Status::at_block_barrier;
    at_warp += l.status == Status::at_warp_barrier;
    done += l.status == Status::done;
  }
  return fmt::format("threads wait at barriers that can never all be reached ({} at __syncthreads, {} at a warp "
                     "operation, {} exited)",
                     at_block, at_warp, done);
}

// Gives every thread of the block a fiber that runs the kernel body on its own stack. A fault (a
// KernelFault or any other exception) ends the thread and, if it is the block's first, is kept as
// the block's fault.
void start_threads(Block& b, StackPool& stacks, KernelBody body) {
  for (size_t i = 0; i < b.lanes.size(); ++i) {
    Lane* lane = &b.lanes[i];
    lane->fiber = ctx::fiber(std::allocator_arg, FixedStack{stacks.stack(i)}, [lane, body](ctx::fiber&& sched) {
      lane->scheduler = std::move(sched);
      try {
        body.fn(body.closure);
      } catch (const ctx::detail::forced_unwind&) {
        throw;  // the fiber is being destroyed: let Boost unwind it
      } catch (const KernelFault& f) {
        if (lane->state.block->fault.empty()) lane->state.block->fault = f.message;
      } catch (const std::exception& e) {
        if (lane->state.block->fault.empty()) lane->state.block->fault = e.what();
      }
      lane->status = Status::done;
      return std::move(lane->scheduler);
    });
  }
}

// Resumes each ready thread once, in lane order (reversed when `reverse`), until it waits or
// exits; stops at the first fault. Returns whether any thread ran.
bool resume_ready_threads(Block& b, bool reverse) {
  bool progressed = false;
  for (size_t k = 0; k < b.lanes.size(); ++k) {
    Lane& l = b.lanes[reverse ? b.lanes.size() - 1 - k : k];
    if (l.status != Status::ready) continue;
    b.running = &l;
    g_current = &l.state;
    l.fiber = std::move(l.fiber).resume();
    g_current = nullptr;
    progressed = true;
    if (l.status == Status::done) {
      b.live--;
      b.warps[size_t(l.state.linear / 32)].live &= ~(1u << (l.state.linear % 32));
    }
    if (!b.fault.empty()) break;
  }
  return progressed;
}

void run_block(Block& b, StackPool& stacks, KernelBody body, bool reverse) {
  start_threads(b, stacks, body);
  for (;;) {
    bool progressed = resume_ready_threads(b, reverse);
    if (!b.fault.empty()) break;
    progressed |= release_barriers(b);
    if (b.live == 0) return;
    if (!progressed) {
      b.fault = describe_stall(b);
      break;
    }
  }
  for (Lane& l : b.lanes) l.fiber = ctx::fiber();  // unwinds the threads still suspended
}

// Host threads that run blocks; the thread that launches takes part too.
class WorkerPool {
 public:
  explicit WorkerPool(int helpers) {
    for (int i = 0; i < helpers; ++i) threads_.emplace_back([this] { serve(); });
  }
  ~WorkerPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }
  // Calls job() on every pool thread and on the caller; returns when all have returned.
  void run(const std::function<void()>& job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      busy_ = int(threads_.size());
      generation_++;
    }
    wake_.notify_all();
    job();
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return busy_ == 0; });
    job_ = nullptr;
  }

 private:
  void serve() {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void()>* job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        job = job_;
      }
      (*job)();
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_ == 0) idle_.notify_all();
    }
  }

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, idle_;
  const std::function<void()>* job_ = nullptr;
  uint64_t generation_ = 0;
  int busy_ = 0;
  bool stopping_ = false;
};

WorkerPool& pool() {
  static WorkerPool* p = new WorkerPool(worker_count() - 1);  // never destroyed: in use until exit
  return *p;
}

struct HostThreadBlock {
  Block block;
  StackPool stacks;
};
HostThreadBlock& this_host_thread() {
  thread_local HostThreadBlock b;
  return b;
}

}  // namespace

int worker_count() {
  static const int n = [] {
    if (const char* env = std::getenv("CUDAGRAD_EMULATION_THREADS"); env && std::atoi(env) > 0) return std::atoi(env);
    return std::max(1, int(std::thread::hardware_concurrency()));
  }();
  return n;
}

std::string check_launch(dim3 grid, dim3 block, size_t dynamic_shared_bytes) {
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (threads == 0 || grid.x == 0 || grid.y == 0 || grid.z == 0) return "a grid or block dimension is 0";
  if (threads > 1024) return fmt::format("{} threads per block (the device allows 1024)", threads);
  if (block.z > 64) return fmt::format("blockDim.z = {} (the device allows 64)", block.z);
  if (grid.y > 65535 || grid.z > 65535) return fmt::format("gridDim ({}, {}, {}) past 65535 in y or z", grid.x, grid.y, grid.z);
  if (grid.x > 0x7fffffffu) return fmt::format("gridDim.x = {} past 2^31 - 1", grid.x);
  if (dynamic_shared_bytes > 227 * 1024) return fmt::format("{} bytes of dynamic shared memory", dynamic_shared_bytes);
  return "";
}

namespace {

// Whether the order environment variable `name` says reverse (unset: forward; anything else is
// refused, saying that the emulated GPU `does` (something) forward or reverse).
bool reverse_order(const char* name, const char* does) {
  const char* v = std::getenv(name);
  const std::string order = v ? v : "forward";
  if (order != "forward" && order != "reverse")
    throw std::invalid_argument(std::string(name) + "=" + order + ": the emulated GPU " + does + " forward or reverse");
  return order == "reverse";
}

}  // namespace

bool reverse_schedule() { return reverse_order("CG_EMU_SCHEDULE", "runs a block's threads"); }

// CG_EMU_BLOCK_ORDER=reverse hands out a grid's blocks last first, so a kernel whose result
// depends on which block finishes last (a last-block reduction adding in arrival order) gives
// another result; read at each grid, so a test can run a kernel both ways in one process.
bool reverse_block_order() { return reverse_order("CG_EMU_BLOCK_ORDER", "hands out blocks"); }

void run_grid(dim3 grid, dim3 block, KernelBody body, const char* kernel_name, bool reverse) {
  const uint64_t blocks = uint64_t(grid.x) * grid.y * grid.z;
  const bool last_first = reverse_block_order();
  std::atomic<uint64_t> next{0};
  std::mutex fault_mutex;
  std::string fault;
  auto work = [&] {
    HostThreadBlock& mine = this_host_thread();
    for (uint64_t n; (n = next.fetch_add(1)) < blocks;) {
      const uint64_t i = last_first ? blocks - 1 - n : n;
      const uint3 idx{unsigned(i % grid.x), unsigned(i / grid.x % grid.y), unsigned(i / (uint64_t(grid.x) * grid.y))};
      prepare(mine.block, grid, block, idx);
      run_block(mine.block, mine.stacks, body, reverse);
      traffic_block_finished(shared_bytes_declared());
      if (!mine.block.fault.empty()) {
        std::lock_guard<std::mutex> lock(fault_mutex);
        if (fault.empty())
          fault = fmt::format("{}: block ({}, {}, {}): {}", kernel_name, idx.x, idx.y, idx.z, mine.block.fault);
        next.store(blocks);  // stop handing out blocks
      }
    }
  };
  if (blocks == 1 || worker_count() == 1) work();
  else pool().run(work);
  if (!fault.empty()) throw KernelFault{fault};
}

void block_barrier() {
  Lane& l = running_lane();
  l.status = Status::at_block_barrier;
  l.state.block->waiting++;
  suspend(l);
}

void report_kernel_fault(std::string message) {
  Block& b = *running_lane().state.block;
  if (b.fault.empty()) b.fault = std::move(message);
}

void warp_barrier(unsigned mask) {
  Lane& l = running_lane();
  const uint32_t bit = 1u << (l.state.linear % 32);
  if (!(mask & bit))
    report_kernel_fault(fmt::format("thread {} calls a warp operation whose mask 0x{:08x} leaves out its own lane {}",
                                    l.state.linear, mask, l.state.linear % 32));
  l.status = Status::at_warp_barrier;
  l.warp_group = mask;
  l.state.block->warps[size_t(l.state.linear / 32)].arrived |= bit;
  suspend(l);
}

unsigned char* warp_slots() {
  Lane& l = running_lane();
  return l.state.block->warps[size_t(l.state.linear / 32)].slots;
}

float* warp_scratch() {
  Lane& l = running_lane();
  return l.state.block->warps[size_t(l.state.linear / 32)].scratch;
}

}  // namespace cg_emu
