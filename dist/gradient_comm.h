// How DDP averages a bucket of its flat gradient buffer over the ranks, and broadcasts tensors
// from rank 0, whatever the buffer's device and the transport:
//   HostGlooComm     CPU tensors, Gloo on the process group's communication thread;
//   StagedGlooComm   CUDA tensors through pinned host memory and Gloo (several ranks may share
//                    one GPU, which NCCL refuses);
//   NcclComm         CUDA tensors, NCCL on a high-priority communication stream, with a watchdog
//                    (dist/comm_stream.h, dist/watchdog.h);
//   ModeledComm      one real rank: the data stays (an average of identical replicas) while the
//                    communication stream is kept busy as long as an N-rank ring all-reduce on a
//                    given link would take, so one GPU measures how much communication overlap hides.
// Which one a job uses: dist/backend_choice.h.
// On a GPU every all-reduce starts after an event recorded on the compute stream, and the compute
// stream waits for it with an event: the host never waits inside a step (except through Gloo,
// which is host code by nature).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "dist/grad_compression.h"
#include "dist/process_group.h"
#include "engine/tensor.h"

namespace cg::dist {

class GradientComm {
 public:
  virtual ~GradientComm() = default;
  // Starts averaging `count` floats at `data` (device memory for CUDA) once the work enqueued so far
  // on `compute` is done. `what` names it in errors and timelines.
  virtual std::shared_ptr<Work> all_reduce_average(float* data, int64_t count, const Stream& compute,
                                                   const std::string& what) = 0;
  // Makes `compute` (or, on the CPU, the caller) wait for `work`; throws the collective's error.
  virtual void wait(Work& work, const Stream& compute) = 0;
  // Overwrites `t` with rank 0's values, in `compute` stream order.
  virtual void broadcast(Tensor& t, const Stream& compute) = 0;
  // false when broadcast() changes nothing (one real rank): callers may skip packing for it.
  virtual bool broadcast_moves_data() const { return true; }
  virtual std::string name() const = 0;
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

  // ---- ZeRO-1 (optim.zero_sharding). A bucket of `count` floats is cut into one contiguous shard
  // per rank: shard_bounds(count) returns world + 1 bounds, rank r's shard is [bounds[r],
  // bounds[r + 1]). The last bound may exceed count: the bucket must then be that long (padding
  // the transport needs, zero and owned by no parameter). The defaults refuse, naming the transport.
  virtual std::vector<int64_t> shard_bounds(int64_t count) const;
  virtual int shard_rank() const { return 0; }
  // Starts averaging the bucket over the ranks into this rank's shard only (the rest of `data` is
  // left holding partial sums), in `compute` order as all_reduce_average.
  virtual std::shared_ptr<Work> reduce_scatter_average(float* data, int64_t count, const Stream& compute,
                                                       const std::string& what);
  // Starts copying every rank's shard of `data` into the other ranks' `data`.
  virtual std::shared_ptr<Work> all_gather_shards(float* data, int64_t count, const Stream& compute,
                                                  const std::string& what);
  // SyncBatchNorm (dist/sync_batchnorm.h): replaces `count` doubles at `data` (on the tensors'
  // device) by their sum over the ranks, the same bits on every rank. CPU: done on return. GPU: in
  // stream order after the work enqueued on `compute`, which waits for it (NCCL: on the
  // communication stream, no host wait). `what` names it in errors and timelines.
  virtual void all_reduce_sum(double* data, int64_t count, const Stream& compute, const std::string& what);
  // dist.grad_compression (dist/grad_compression.h): averages the float32 `bucket` as PyTorch's
  // fp16/bf16 compress hook (but dividing before the cast), with 16-bit data on the wire. `compressed` (f16 or bf16, the
  // bucket's size and device; DDP allocates one per bucket, once) receives the compressed values,
  // is summed over the ranks, and is cast back into `bucket`. Ordered as all_reduce_average; both
  // tensors must stay alive and untouched until the work is waited for.
  virtual std::shared_ptr<Work> all_reduce_compressed(Tensor& bucket, Tensor& compressed, const Stream& compute,
                                                      const std::string& what);
  // ZeRO-1 with dist.grad_compression: the first half of all_reduce_compressed. `bucket` and
  // `compressed` are the whole (padded, as shard_bounds says) bucket; the whole bucket is divided
  // and cast, the 16-bit values are reduce-scattered, and only this rank's shard of `bucket`
  // receives its cast-back sum, the same bits all_reduce_compressed leaves there (the rest of
  // `bucket` is scratch). The default refuses, naming the transport.
  virtual std::shared_ptr<Work> reduce_scatter_compressed(Tensor& bucket, Tensor& compressed, const Stream& compute,
                                                          const std::string& what);
  // "" when all_reduce_compressed works on this transport, else why not (for the refusal).
  virtual std::string why_no_compression() const { return name() + " has no 16-bit all-reduce"; }
};

std::unique_ptr<GradientComm> make_host_gloo_comm(ProcessGroup& group);
std::unique_ptr<GradientComm> make_staged_gloo_comm(ProcessGroup& group, Device device);
// rank 0 creates the NCCL id and shares it through the store; timeout: the watchdog's limit.
std::unique_ptr<GradientComm> make_nccl_comm(TcpStore& store, int rank, int world_size, Device device,
                                             double timeout_s);

// A ring all-reduce of `bytes` over `ranks`: 2(N-1) steps of bytes/N each way, each paying the
// link latency: 2(N-1)/N * bytes / bandwidth + 2(N-1) * latency.
struct Link {
  std::string name;
  double bandwidth_gb_s;  // per GPU, one direction
  double latency_us;
};
Link nvlink_link();       // H100 SXM in an 8-GPU NVSwitch node
Link infiniband_link();   // 200 Gb/s per GPU across nodes
double ring_all_reduce_ms(size_t bytes, int ranks, const Link& link);
// One half of that ring (a reduce-scatter, or an all-gather): (N-1)/N * bytes / bandwidth + (N-1) * latency.
double ring_half_ms(size_t bytes, int ranks, const Link& link);
std::unique_ptr<GradientComm> make_modeled_comm(int modeled_ranks, const Link& link, Device device);

}  // namespace cg::dist
