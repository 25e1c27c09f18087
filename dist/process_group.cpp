#include "dist/process_group.h"

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>

#include "dist/gloo_mesh.h"
#include "dist/process_group_impl.h"
#include "util/check.h"
#include "util/half.h"
#include "util/trace.h"

namespace cg::dist {

void Work::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

void Work::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = error;
    done_ = true;
  }
  cv_.notify_all();
}

bool Work::done() {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

ProcessGroup::ProcessGroup(TcpStore& store, int rank, int world_size, const std::string& my_host,
                           const ProcessGroupOptions& options)
    : rank_(rank), world_(world_size), options_(options), impl_(std::make_unique<Impl>()) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = my_host;
    impl_->device = gloo::transport::tcp::CreateDevice(attr);
    impl_->context = connect_full_mesh(store, impl_->device, rank, world_size, options.timeout, options.key_prefix);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(fmt::format("rank {}: could not set up the process group at {}: {}", rank, my_host, e.what()));
  }
  thread_ = std::thread([this] { run(); });
}

ProcessGroup::~ProcessGroup() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ProcessGroup::run() {
  while (true) {
    std::pair<std::shared_ptr<Work>, std::function<void()>> item;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    std::exception_ptr error;
    const auto started = std::chrono::steady_clock::now();
    try {
      item.second();
    } catch (...) {
      error = std::current_exception();
    }
    item.first->started = started;
    item.first->finished = std::chrono::steady_clock::now();
    item.first->finish(error);
  }
}

std::shared_ptr<Work> ProcessGroup::enqueue(const std::string& what, std::function<void()> fn) {
  auto work = std::make_shared<Work>();
  auto wrapped = [this, what, fn = std::move(fn)] {
    try {
      fn();
    } catch (const std::exception& e) {
      // Which peer let it down: with two ranks it can only be the other one; with more, Gloo's
      // message names the peer's address.
      const std::string peer = world_ == 2 ? fmt::format("rank {}", 1 - rank_) : std::string("a peer");
      throw Error(fmt::format("rank {}: {} failed: {} ({} did not take part within {} s: it stalled or died)", rank_,
                              what, e.what(), peer, options_.timeout.count() / 1000.0));
    }
  };
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.emplace_back(work, std::move(wrapped));
  }
  cv_.notify_all();
  return work;
}

std::shared_ptr<Work> ProcessGroup::all_reduce_async(float* data, int64_t count, ReduceOp op) {
  const uint32_t tag = next_tag_++;
  ++all_reduces_;
  return enqueue(fmt::format("all_reduce of {} floats", count), [this, data, count, op, tag] {
    trace::Span span(fmt::format("all_reduce {} floats ({} bytes)", count, count * 4), "communication");
    if (options_.artificial_delay.count() > 0) std::this_thread::sleep_for(options_.artificial_delay);
    if (world_ > 1) {
      gloo::AllreduceOptions o(impl_->context);
      o.setOutput(data, size_t(count));
      o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      o.setTag(tag);
      o.setTimeout(options_.timeout);
      gloo::allreduce(o);
    }
    if (op == ReduceOp::average) {
      const float inv = 1.0f / float(world_);
      for (int64_t i = 0; i < count; ++i) data[i] *= inv;
    }
  });
}

void ProcessGroup::all_reduce(double* data, int64_t count) {
  const uint32_t tag = next_tag_++;
  enqueue(fmt::format("all_reduce of {} doubles", count), [this, data, count, tag] {
    if (world_ == 1) return;
    gloo::AllreduceOptions o(impl_->context);
    o.setOutput(data, size_t(count));
    o.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<double>));
    o.setTag(tag);
    o.setTimeout(options_.timeout);
    gloo::allreduce(o);
  })->wait();
}

void ProcessGroup::broadcast(void* data, size_t bytes, int root) {
  const uint32_t tag = next_tag_++;
  enqueue(fmt::format("broadcast of {} bytes from rank {}", bytes, root), [this, data, bytes, root, tag] {
    if (world_ == 1) return;
    gloo::BroadcastOptions o(impl_->context);
    o.setOutput(static_cast<uint8_t*>(data), bytes);
    o.setRoot(root);
    o.setTag(tag);
    o.setTimeout(options_.timeout);
    gloo::broadcast(o);
  })->wait();
}

void ProcessGroup::all_gather(const void* in, void* out, size_t bytes) {
  const uint32_t tag = next_tag_++;
  enqueue(fmt::format("all_gather of {} bytes", bytes), [this, in, out, bytes, tag] {
    if (world_ == 1) {
      std::memcpy(out, in, bytes);
      return;
    }
    gloo::AllgatherOptions o(impl_->context);
    o.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(in)), bytes);
    o.setOutput(static_cast<uint8_t*>(out), bytes * size_t(world_));
    o.setTag(tag);
    o.setTimeout(options_.timeout);
    gloo::allgather(o);
  })->wait();
}

void ProcessGroup::barrier() {
  const uint32_t tag = next_tag_++;
  enqueue("barrier", [this, tag] {
    if (world_ == 1) return;
    gloo::BarrierOptions o(impl_->context);
    o.setTag(tag);
    o.setTimeout(options_.timeout);
    gloo::barrier(o);
  })->wait();
}

namespace {

// a + b rounded to the 16-bit type T (Half or BFloat16). The float32 sum of two 16-bit values,
// rounded again to 16 bits, is the correctly rounded 16-bit sum (24 >= 2 * 11 + 2 bits: the double
// rounding is harmless), which is what a GPU's 16-bit addition gives.
template <typename T>
uint16_t add_16bit(uint16_t a, uint16_t b) {
  T x, y;
  x.bits = a;
  y.bits = b;
  return T(float(x) + float(y)).bits;
}

}  // namespace

std::shared_ptr<Work> ProcessGroup::all_reduce_16bit_async(void* data, int64_t count, DType dtype,
                                                           std::function<void()> then) {
  return enqueue_16bit(data, count, dtype, /*gather=*/true, std::move(then));
}

std::shared_ptr<Work> ProcessGroup::reduce_scatter_16bit_async(void* data, int64_t count, DType dtype,
                                                               std::function<void()> then) {
  return enqueue_16bit(data, count, dtype, /*gather=*/false, std::move(then));
}

std::shared_ptr<Work> ProcessGroup::enqueue_16bit(void* data, int64_t count, DType dtype, bool gather,
                                                  std::function<void()> then) {
  CG_CHECK(dtype == DType::f16 || dtype == DType::bf16, "16-bit {} of {} values",
           gather ? "all-reduce" : "reduce-scatter", dtype_name(dtype));
  const uint32_t tag = next_tag_;
  next_tag_ += 2;  // the all-to-all and the all-gather
  if (gather) ++all_reduces_;
  // The bytes are this rank's whole 16-bit buffer, as in the float32 names.
  const std::string what = fmt::format("{} of {} {} values ({} bytes)", gather ? "all_reduce" : "reduce_scatter",
                                       count, dtype_name(dtype), count * 2);
  return enqueue(what, [this, data, count, dtype, tag, gather, what, then = std::move(then)] {
    trace::Span span(what, "communication");
    if (options_.artificial_delay.count() > 0) std::this_thread::sleep_for(options_.artificial_delay);
    if (world_ > 1) sum_16bit_over_ranks(static_cast<uint16_t*>(data), count, dtype, tag, gather);
    if (then) then();
  });
}

// Chunk r is ring_shard_bounds' block r (the float32 ring's blocks, and so ZeRO-1's shards): which
// rank adds a chunk changes no bit of the result, and one partition serves every collective.
void ProcessGroup::sum_16bit_over_ranks(uint16_t* data, int64_t count, DType dtype, uint32_t tag, bool gather) {
  const size_t w = size_t(world_);
  const std::vector<int64_t> bounds = ring_shard_bounds(count, world_);
  std::vector<int64_t> chunk(w);
  for (size_t r = 0; r < w; ++r) chunk[r] = bounds[r + 1] - bounds[r];
  const int64_t mine = chunk[size_t(rank_)];
  wire_scratch_.resize(std::max<size_t>(1, size_t(mine) * w));
  gloo::AlltoallvOptions scatter(impl_->context);
  scatter.setInput<uint16_t>(data, chunk);
  scatter.setOutput<uint16_t>(wire_scratch_.data(), std::vector<int64_t>(w, mine));
  scatter.setTag(tag);
  scatter.setTimeout(options_.timeout);
  gloo::alltoallv(scatter);
  // wire_scratch_ holds W rows of `mine` values, row j from rank j: sum each column into row 0.
  auto add = dtype == DType::f16 ? &add_16bit<Half> : &add_16bit<BFloat16>;
  for (int64_t i = 0; i < mine; ++i) {
    uint16_t sum = wire_scratch_[size_t(i)];
    for (size_t j = 1; j < w; ++j) sum = add(sum, wire_scratch_[j * size_t(mine) + size_t(i)]);
    wire_scratch_[size_t(i)] = sum;
  }
  if (!gather) {  // reduce-scatter: this rank's chunk only
    std::copy(wire_scratch_.begin(), wire_scratch_.begin() + mine, data + bounds[size_t(rank_)]);
    return;
  }
  gloo::AllgathervOptions all(impl_->context);
  all.setInput<uint16_t>(wire_scratch_.data(), size_t(mine));
  all.setOutput<uint16_t>(data, std::vector<size_t>(chunk.begin(), chunk.end()));
  all.setTag(tag + 1);
  all.setTimeout(options_.timeout);
  gloo::allgatherv(all);
}

}  // namespace cg::dist
