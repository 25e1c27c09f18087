// Collective communication among the ranks of a job. Every collective runs on one communication
// thread, in the order it was issued, which is the same on every rank; the caller gets a Work
// handle and may go on computing (that is how all-reduce overlaps backward on the CPU, the
// communication thread standing in for a CUDA communication stream). A collective that fails or
// exceeds the timeout becomes a cg::Error naming the operation and the rank, never a hang.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/tcp_store.h"
#include "engine/stream.h"
#include "util/dtype.h"

namespace cg::dist {

enum class ReduceOp { sum, average };

// Gloo's ring all-reduce of `count` floats over `world` ranks: it splits the buffer into world
// contiguous blocks (the last ones shorter or empty) and block r ends fully reduced on rank r.
// Returns world + 1 bounds, block r = [bounds[r], bounds[r + 1]). The one partition of a bucket:
// ZeRO-1's shards on Gloo and the chunks of our 16-bit all-reduce and reduce-scatter are these too.
std::vector<int64_t> ring_shard_bounds(int64_t count, int world);

// A collective in flight. wait() blocks until it is done and rethrows its error.
class Work {
 public:
  void wait();
  bool done();
  // Marks it done (with an error, or none) and wakes the waiters: for whoever runs the collective.
  void finish(std::exception_ptr error = nullptr);
  // When the communication thread started and finished it (valid once done).
  std::chrono::steady_clock::time_point started, finished;
  // GPU collectives: recorded on the communication stream after the collective, so a consumer
  // stream can wait for it (dist/gradient_comm.h). Undefined for host collectives.
  Event device_done;
  // With profiling on: a timing event recorded just before the collective (device_done then has
  // timing too), for its device times on the timeline. Undefined otherwise.
  Event device_started;
  // The modeled backend: how long it keeps the communication stream (or thread) busy for this
  // collective, from the bytes it carries; 0 for real collectives. Set before it is handed out.
  double modeled_ms = 0;

 private:
  friend class ProcessGroup;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

struct ProcessGroupOptions {
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  // A subgroup's rendezvous keys start with it (dist/gloo_mesh.h); "" for the job's own group.
  std::string key_prefix;
  // Testing aid: every all-reduce also sleeps this long, to make communication measurable.
  std::chrono::milliseconds artificial_delay{0};
};

// The Gloo-backed CPU process group (the library PyTorch uses for CPU collectives).
class ProcessGroup {
 public:
  // Connects to every other rank through `store` (dist/gloo_mesh.h: within options.timeout, or a
  // cg::Error naming the peer and the address dialed). `my_host`: the address this rank listens
  // on and advertises to its peers (dist/advertised_address.h says which).
  ProcessGroup(TcpStore& store, int rank, int world_size, const std::string& my_host,
               const ProcessGroupOptions& options);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return world_; }

  std::shared_ptr<Work> all_reduce_async(float* data, int64_t count, ReduceOp op);
  void all_reduce(float* data, int64_t count, ReduceOp op) { all_reduce_async(data, count, op)->wait(); }
  void all_reduce(double* data, int64_t count);  // sum; for metrics
  void broadcast(void* data, size_t bytes, int root);
  // out receives size() * bytes: every rank's `in`, in rank order.
  void all_gather(const void* in, void* out, size_t bytes);
  void barrier();

  int64_t all_reduces_issued() const { return all_reduces_; }

  // ---- sharded data parallelism (dist.sharding): a bucket of `count` floats is cut into size() contiguous
  // shards exactly as Gloo's ring all-reduce cuts it (ring_shard_bounds), and the two halves of
  // that ring run separately. So a shard's reduce-scatter adds the ranks' values in the same
  // order as all_reduce_async does, and sharded training stays bit-identical to unsharded.
  // In place: afterwards shard rank() of `data` holds the reduction, the other shards partial sums.
  std::shared_ptr<Work> reduce_scatter_async(float* data, int64_t count, ReduceOp op);
  // In place: every rank's shard rank() of `data` is copied into the others' `data`. The
  // elements are `element_size` bytes each (2: full_shard's 16-bit gathers, dist.param_dtype), cut
  // where a float32 bucket of `count` is.
  std::shared_ptr<Work> all_gather_shards_async(void* data, int64_t count, size_t element_size = sizeof(float));
  // Sums `count` 16-bit floats at `data` (`dtype` f16 or bf16; host memory) in place over the
  // ranks with 16-bit data on the wire, then runs `then` (may be empty) on the communication
  // thread. Gloo has no bfloat16 sum, and its float16 ring adds in an order of its own, so the sum
  // is ours, as a reduce-scatter and an all-gather with Gloo moving the bytes: the buffer is cut
  // into one chunk per rank (chunk r: ring_shard_bounds(count, size()) block r, as the float32
  // ring and ZeRO-1 cut it); an all-to-all hands rank r every rank's copy of chunk r; rank r adds
  // them in rank order 0, 1, ..., W-1, rounding to the 16-bit type (nearest even) after every
  // addition; an all-gather hands every rank every sum. So every rank ends with the same bits, and
  // each sends 2(W-1)/W * count * 2 bytes, as a ring all-reduce of 16-bit data would.
  std::shared_ptr<Work> all_reduce_16bit_async(void* data, int64_t count, DType dtype, std::function<void()> then);
  // Its first half (ZeRO-1 with dist.grad_compression): afterwards only chunk rank() of `data`
  // holds the sum (the same bits the all-reduce gives there), the rest is left as it was;
  // (W-1)/W * count * 2 bytes sent.
  std::shared_ptr<Work> reduce_scatter_16bit_async(void* data, int64_t count, DType dtype, std::function<void()> then);

 private:
  struct Impl;
  std::shared_ptr<Work> enqueue(const std::string& what, std::function<void()> fn);
  void run();
  // The two halves of Gloo's ring on one bucket (dist/ring_shards.cpp).
  void ring_reduce_scatter(float* data, int64_t count, uint32_t tag);
  void ring_all_gather(void* data, int64_t count, size_t element_size, uint32_t tag);

  int rank_, world_;
  ProcessGroupOptions options_;
  std::unique_ptr<Impl> impl_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::pair<std::shared_ptr<Work>, std::function<void()>>> queue_;
  bool stopping_ = false;
  uint32_t next_tag_ = 0;
  int64_t all_reduces_ = 0;
  std::thread thread_;
  std::shared_ptr<Work> enqueue_16bit(void* data, int64_t count, DType dtype, bool gather, std::function<void()> then);
  void sum_16bit_over_ranks(uint16_t* data, int64_t count, DType dtype, uint32_t tag, bool gather);
  std::vector<uint16_t> wire_scratch_;  // all_reduce_16bit_async's receive buffer (communication thread)
};

}  // namespace cg::dist
