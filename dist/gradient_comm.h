// How DDP's reducers average a bucket of the flat gradient buffer over the ranks, and how tensors
// are broadcast from rank 0, whatever the buffer's device and the transport. Every transport has
// the float32 collectives of GradientComm; ZeRO-1's halves of the ring (ShardCollectives) and the
// 16-bit sums of dist.grad_compression (Wire16Collectives) are families a transport may offer:
//   HostGlooComm     CPU tensors, Gloo on the process group's communication thread (both);
//   StagedGlooComm   CUDA tensors through pinned host memory and Gloo (several ranks may share
//                    one GPU, which NCCL refuses; the ring's halves, no 16-bit sums);
//   NcclComm         CUDA tensors, NCCL on a high-priority communication stream, with a watchdog
//                    (dist/comm_stream.h, dist/watchdog.h; both);
//   ModeledComm      one real rank: the data stays (an average of identical replicas) while the
//                    communication stream is kept busy as long as an N-rank ring all-reduce on a
//                    given link would take, so one GPU measures how much communication overlap
//                    hides (both, timed as the ring's halves and 16-bit bytes).
// Which one a job uses: dist/backend_choice.h.
// On a GPU every all-reduce starts after an event recorded on the compute stream, and the compute
// stream waits for it with an event: the host never waits inside a step (except through Gloo,
// which is host code by nature).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dist/process_group.h"
#include "engine/tensor.h"

namespace cg::dist {

class ShardCollectives;
class Wire16Collectives;

// The float32 collectives every transport has. A transport that also has ZeRO-1's halves of the
// ring or a 16-bit sum says so through shards() and wire16(), which are null otherwise: callers
// refuse a setting the transport cannot serve when they are built, naming it.
class GradientComm {
 public:
  virtual ~GradientComm() = default;
  virtual std::string name() const = 0;
  // This rank, and the ranks whose values a collective combines (the modeled backend: one real
  // rank standing for many).
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Starts averaging the float32 `data` (contiguous, on the tensors' device) once the work
  // enqueued so far on `compute` is done. `what` names it in errors and timelines. `data` must
  // stay alive and untouched until the work is waited for.
  virtual std::shared_ptr<Work> all_reduce_average(Tensor& data, const Stream& compute, const std::string& what) = 0;
  // Makes `compute` (or, on the CPU, the caller) wait for `work`; throws the collective's error.
  virtual void wait(Work& work, const Stream& compute) = 0;
  // Overwrites `t` with rank 0's values, in `compute` stream order.
  virtual void broadcast(Tensor& t, const Stream& compute) = 0;
  // SyncBatchNorm (dist/sync_batch_norm.h): replaces `count` doubles at `data` (on the tensors'
  // device) by their sum over the ranks, the same bits on every rank. CPU: done on return. GPU: in
  // stream order after the work enqueued on `compute`, which waits for it (NCCL: on the
  // communication stream, no host wait). `what` names it in errors and timelines.
  virtual void all_reduce_sum(double* data, int64_t count, const Stream& compute, const std::string& what) = 0;
  // The modeled backend's time per all-reduce of `bytes`, else 0.
  virtual double modeled_ms(size_t bytes) const { return 0; }
  // CUDA graphs: a replay with captured collectives was just enqueued on `compute`; the GPU
  // transports watch it like a collective (timeout, asynchronous errors). Host transports cannot
  // be captured and have nothing to do.
  virtual void watch_replay(const Stream& compute, const std::string& what) const {}
  // Throws the error of an earlier collective or replay (a timeout, an asynchronous NCCL error),
  // if any. A replay calls it first: once the watchdog has aborted the communicator, the graph's
  // captured collectives would use a freed one, and the fault would hide the watchdog's message.
  virtual void check_health() const {}

  // The sharded strategies' collectives (dist.sharding), null where the transport has none.
  virtual ShardCollectives* shards() { return nullptr; }
  // The 16-bit sums dist.grad_compression travels in, null where the transport has none; then
  // why_no_wire16() says why, for the refusal.
  virtual Wire16Collectives* wire16() { return nullptr; }
  virtual std::string why_no_wire16() const { return name() + " has no 16-bit all-reduce"; }
};

// The transport's shard collectives, or a UsageError saying `who` (a strategy, as the config
// names it) cannot run over it.
ShardCollectives& require_shard_collectives(GradientComm& transport, const std::string& who);

// Sharded data parallelism (dist.sharding). A bucket of `count` floats is cut into one contiguous shard per
// rank: shard_bounds(count) returns size() + 1 bounds, rank r's shard is [bounds[r],
// bounds[r + 1]). The last bound may exceed count: the bucket must then be that long (padding
// the transport needs, zero and owned by no parameter). Ordered as all_reduce_average.
class ShardCollectives {
 public:
  virtual ~ShardCollectives() = default;
  virtual std::vector<int64_t> shard_bounds(int64_t count) const = 0;
  // Starts averaging the float32 bucket over the ranks into this rank's shard only (the rest of
  // `data` is left holding partial sums).
  virtual std::shared_ptr<Work> reduce_scatter_average(Tensor& data, const Stream& compute,
                                                       const std::string& what) = 0;
  // Starts copying every rank's shard of `data` into the other ranks' `data`: float32, or 16-bit
  // (full_shard's gathers in dist.param_dtype), cut by shard_bounds(data.numel()) either way.
  virtual std::shared_ptr<Work> all_gather_shards(Tensor& data, const Stream& compute, const std::string& what) = 0;
};

// Work a caller puts around a 16-bit sum, run in the collective's own order: on a GPU enqueued on
// the communication stream after the compute stream's work (which neither waits nor runs them);
// through Gloo, `before` on the calling thread and `after` on the communication thread, after the
// sum. Either may be empty. dist/grad_compression.h puts its casts here.
struct WireStages {
  std::function<void()> before, after;
};

// Sums of 16-bit floats (f16 or bf16) over the ranks, every rank getting the same bits.
class Wire16Collectives {
 public:
  virtual ~Wire16Collectives() = default;
  // Replaces the 16-bit `wire` by its sum over the ranks. `wire` stays alive and untouched until
  // the work is waited for.
  virtual std::shared_ptr<Work> all_reduce_sum(Tensor& wire, const Stream& compute, const std::string& what,
                                               WireStages stages) = 0;
  // Its first half (ZeRO-1 with dist.grad_compression): only this rank's shard
  // (ShardCollectives::shard_bounds of wire.numel()) receives the sum, the same bits
  // all_reduce_sum leaves there; the rest is left as it was. Null, running nothing, where the
  // transport has only the all-reduce (the default).
  virtual std::shared_ptr<Work> reduce_scatter_sum(Tensor& wire, const Stream& compute, const std::string& what,
                                                   WireStages stages) {
    return nullptr;
  }
};

std::unique_ptr<GradientComm> make_host_gloo_comm(ProcessGroup& group);
std::unique_ptr<GradientComm> make_staged_gloo_comm(ProcessGroup& group, Device device);
// rank 0 creates the NCCL id and shares it through the store; timeout: the watchdog's limit.
// Refused, naming the cause, in a build without NCCL.
// `key_prefix` names a subgroup's id apart from the job's (dist.sharding=hybrid_shard).
std::unique_ptr<GradientComm> make_nccl_comm(TcpStore& store, int rank, int world_size, Device device,
                                             double timeout_s, const std::string& key_prefix = "");
// make_nccl_comm where NCCL is linked (nccl_comm.cpp, compiled only then: dist/nccl_api.h).
std::unique_ptr<GradientComm> make_linked_nccl_comm(TcpStore& store, int rank, int world_size, Device device,
                                                    double timeout_s, const std::string& key_prefix);

// A ring all-reduce of `bytes` over `ranks`: 2(N-1) steps of bytes/N each way, each paying the
// link latency: 2(N-1)/N * bytes / bandwidth + 2(N-1) * latency.
struct Link {
  std::string name;
  double bandwidth_gb_s;  // per GPU, one direction
  double latency_us;
};
Link nvlink_link();       // H100 SXM in an 8-GPU NVSwitch node
inline constexpr int kNvlinkNodeGpus = 8;  // the GPUs of such a node
Link infiniband_link();   // 200 Gb/s per GPU across nodes
double ring_all_reduce_ms(size_t bytes, int ranks, const Link& link);
// One half of that ring (a reduce-scatter, or an all-gather): (N-1)/N * bytes / bandwidth + (N-1) * latency.
double ring_half_ms(size_t bytes, int ranks, const Link& link);
// One real rank standing for `modeled_ranks`; each collective is timed as if it moved
// `bytes_scale` times the real rank's bytes (hybrid_shard's modeled cross-node all-reduce: a
// modeled rank's shard of the unit the one real rank holds whole).
std::unique_ptr<GradientComm> make_modeled_comm(int modeled_ranks, const Link& link, Device device,
                                                double bytes_scale = 1.0);

}  // namespace cg::dist
