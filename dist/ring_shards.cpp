// ZeRO-1's collectives on the CPU: the reduce-scatter and all-gather halves of Gloo's ring
// all-reduce, run separately over Gloo's point-to-point buffers. Rule: same blocks, same ring
// direction, same additions as gloo::allreduce (gloo/allreduce.cc, ring(), in the Gloo that
// Debian ships), so every element of a shard is summed in exactly the order the all-reduce sums
// it; a sharded step is then bit-identical to an unsharded one whatever the number of ranks.
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "dist/process_group_impl.h"
#include "util/check.h"
#include "util/trace.h"

namespace cg::dist {
namespace {

// Gloo's AllreduceOptions::kMaxSegmentSize: the ring cuts its buffer into segments of at most this.
constexpr int64_t kGlooMaxSegmentBytes = 1024 * 1024;
// Our own slot prefix, apart from Gloo's collectives' (0x01..0x0b in gloo/types.h).
constexpr uint8_t kShardSlotPrefix = 0x41;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::vector<int64_t> ring_shard_bounds(int64_t count, int world) {
  CG_CHECK(count >= 0 && world >= 1, "ring_shard_bounds: {} elements over {} ranks", count, world);
  // gloo ring(): numSegments = roundUp(max(ceil(bytes / maxSegment), 2 * world), world) segments of
  // segmentBytes = roundUp(ceil(bytes / numSegments), 4) each; rank r ends with the reduction of
  // segments [r * numSegments / world, (r + 1) * numSegments / world).
  const int64_t bytes = count * int64_t(sizeof(float));
  const int64_t segments =
      ceil_div(std::max(ceil_div(bytes, kGlooMaxSegmentBytes), int64_t(2) * world), world) * world;
  const int64_t segment = std::max<int64_t>(ceil_div(count, segments), count > 0 ? 1 : 0);
  const int64_t per_rank = segments / world;
  std::vector<int64_t> bounds(size_t(world) + 1);
  for (int r = 0; r <= world; ++r) bounds[size_t(r)] = std::min(int64_t(r) * per_rank * segment, count);
  bounds[size_t(world)] = count;
  return bounds;
}

struct RingPlan {  // a rank's view of the blocks of one bucket
  std::vector<int64_t> bounds;
  int world, rank;
  int64_t begin(int64_t block) const { return bounds[size_t(wrap(block))]; }
  int64_t length(int64_t block) const { return bounds[size_t(wrap(block)) + 1] - bounds[size_t(wrap(block))]; }
  int64_t wrap(int64_t block) const { return ((block % world) + world) % world; }
};

// gloo's reduce/scatter loop: at step k a rank sends block rank+1+k (its partial sum) to rank-1
// and adds block rank+2+k from rank+1 into its own values (x_local + received). Block b starts at
// rank b-1 and ends, complete, at rank b.
void ProcessGroup::ring_reduce_scatter(float* data, int64_t count, uint32_t tag) {
  auto& context = impl_->context;
  const RingPlan plan{ring_shard_bounds(count, world_), world_, rank_};
  int64_t largest = 0;
  for (int b = 0; b < world_; ++b) largest = std::max(largest, plan.length(b));
  std::vector<float> incoming(size_t(std::max<int64_t>(largest, 1)));
  auto out = context->createUnboundBuffer(data, size_t(count) * sizeof(float));
  auto in = context->createUnboundBuffer(incoming.data(), incoming.size() * sizeof(float));
  const auto slot = gloo::Slot::build(kShardSlotPrefix, tag);
  const int send_to = (rank_ + world_ - 1) % world_, receive_from = (rank_ + 1) % world_;
  for (int k = 0; k + 1 < world_; ++k) {
    const int64_t send_block = rank_ + 1 + k, receive_block = rank_ + 2 + k;
    const int64_t n_in = plan.length(receive_block), n_out = plan.length(send_block);
    if (n_in > 0) in->recv(receive_from, slot, 0, size_t(n_in) * sizeof(float));
    if (n_out > 0)
      out->send(send_to, slot, size_t(plan.begin(send_block)) * sizeof(float), size_t(n_out) * sizeof(float));
    if (n_in > 0) {
      in->waitRecv(options_.timeout);
      float* mine = data + plan.begin(receive_block);
      gloo::sum<float>(mine, mine, incoming.data(), size_t(n_in));
    }
    if (n_out > 0) out->waitSend(options_.timeout);
  }
}

// gloo's allgather loop: at step k a rank sends block rank+k to rank-1 and receives block rank+1+k
// from rank+1, straight into place. Elements of any size: nothing is added.
void ProcessGroup::ring_all_gather(void* data, int64_t count, size_t element_size, uint32_t tag) {
  auto& context = impl_->context;
  const RingPlan plan{ring_shard_bounds(count, world_), world_, rank_};
  auto buffer = context->createUnboundBuffer(data, size_t(count) * element_size);
  const auto slot = gloo::Slot::build(kShardSlotPrefix, tag);
  const int send_to = (rank_ + world_ - 1) % world_, receive_from = (rank_ + 1) % world_;
  for (int k = 0; k + 1 < world_; ++k) {
    const int64_t send_block = rank_ + k, receive_block = rank_ + 1 + k;
    const int64_t n_in = plan.length(receive_block), n_out = plan.length(send_block);
    if (n_in > 0)
      buffer->recv(receive_from, slot, size_t(plan.begin(receive_block)) * element_size, size_t(n_in) * element_size);
    if (n_out > 0)
      buffer->send(send_to, slot, size_t(plan.begin(send_block)) * element_size, size_t(n_out) * element_size);
    if (n_in > 0) buffer->waitRecv(options_.timeout);
    if (n_out > 0) buffer->waitSend(options_.timeout);
  }
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_async(float* data, int64_t count, ReduceOp op) {
  const uint32_t tag = next_tag_++;
  return enqueue(fmt::format("reduce_scatter of {} floats", count), [this, data, count, op, tag] {
    trace::Span span(fmt::format("reduce_scatter {} floats", count), "communication");
    if (options_.artificial_delay.count() > 0) std::this_thread::sleep_for(options_.artificial_delay);
    if (world_ > 1) ring_reduce_scatter(data, count, tag);
    if (op == ReduceOp::average) {  // as all_reduce_async: the sum times the float 1/world
      const std::vector<int64_t> bounds = ring_shard_bounds(count, world_);
      const float inv = 1.0f / float(world_);
      for (int64_t i = bounds[size_t(rank_)]; i < bounds[size_t(rank_) + 1]; ++i) data[i] *= inv;
    }
  });
}

std::shared_ptr<Work> ProcessGroup::all_gather_shards_async(void* data, int64_t count, size_t element_size) {
  const uint32_t tag = next_tag_++;
  const std::string what = element_size == sizeof(float) ? "floats" : fmt::format("{}-byte elements", element_size);
  return enqueue(fmt::format("all_gather of {} {}", count, what), [this, data, count, element_size, what, tag] {
    trace::Span span(fmt::format("all_gather {} {}", count, what), "communication");
    if (world_ > 1) ring_all_gather(data, count, element_size, tag);
  });
}

}  // namespace cg::dist
