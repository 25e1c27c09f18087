// Convolution through cuDNN's convolution API: descriptors built once per layer shape and host
// thread, the algorithm per (shape, layout, dtype, direction, rule) chosen once and cached (no lock
// once a thread has seen the shape: cached_choice), scratch from the caller. Only deterministic algorithms unless the rule admits the others (cudnn_algo_pick.h).
// Layout::nhwc describes x, y and the filter (then KRSC) as CUDNN_TENSOR_NHWC, the format whose
// tensor-core kernels need no internal transposes.
// float32 runs with FMA math only (no TF32), so it matches the CPU reference; half types may use
// tensor cores. All accumulate in float32.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "kernels/cuda/cudnn.h"
#include "kernels/cuda/cudnn_algo_pick.h"
#include "kernels/cuda/conv_native.h"
#include "kernels/cuda/cudnn_common.h"
#include "kernels/cuda/stream.h"

namespace cg::kernels::cuda {
namespace {

using cudnn::TensorDesc;

enum class Dir { forward, data, filter };

struct Choice {
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t workspace = 0;
  float ms = -1.f;  // what the timed search measured (-1: heuristic)
};

// The best algorithm differs between layouts (NHWC opens the tensor-core kernels), so the layout
// is part of the key.
using Key =
    std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, int, int, bool>;
Key key_of(const Conv2dShape& s, Layout layout, DType dtype, Dir dir, AlgoRule rule) {
  return {s.n,         s.c_in,   s.h, s.w, s.c_out, s.kh, s.kw, s.stride, s.pad, int(layout), int(dtype), int(dir),
          int(rule.search), rule.deterministic};
}

cudnnTensorFormat_t format_of(Layout layout) {
  return layout == Layout::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
}

// Everything one call needs: the four descriptors of this layer (the bias's too, in y's format).
struct Descs {
  TensorDesc x, y, bias;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;

  Descs(const Conv2dShape& s, DType dtype, Layout layout)
      : x(dtype, s.n, s.c_in, s.h, s.w, format_of(layout)),
        y(dtype, s.n, s.c_out, s.out_h(), s.out_w(), format_of(layout)),
        bias(dtype, 1, s.c_out, 1, 1, format_of(layout)) {
    // Filter sizes are always given as (c_out, c_in, kh, kw); the NHWC format stores them KRSC.
    CG_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
    CG_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, cudnn::data_type(dtype), format_of(layout), int(s.c_out), int(s.c_in),
                                              int(s.kh), int(s.kw)));
    CG_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
    CG_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, int(s.pad), int(s.pad), int(s.stride), int(s.stride), 1, 1,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CG_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, dtype == DType::f32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
  }
  ~Descs() {
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

// The timed search's second look: Find times each candidate once, and its order moved between
// two processes on the H200, so the first kRetimed candidates the rule admits run again, kRuns
// times each on the caller's own buffers (the call that follows writes its output again), and the
// lowest median wins. `run(choice, workspace)` enqueues the layer's pass with one algorithm.
constexpr int kRetimed = 3, kRuns = 5;

template <typename Perf, typename Run>
Choice fastest_retimed(const Perf* perf, int count, AlgoRule rule, DType dtype, const Run& run,
                       const WorkspaceFn& workspace, Stream stream) {
  std::vector<Choice> candidates;
  for (int i : admitted_algorithms(perf, count, rule.deterministic, kRetimed))
    candidates.push_back({int(perf[i].algo), dtype == DType::f32 ? CUDNN_FMA_MATH : perf[i].mathType,
                          perf[i].memory, perf[i].time});
  if (candidates.size() < 2) return candidates.front();  // nothing to compare (first_ok found one)
  size_t most = 0;
  for (const Choice& c : candidates) most = std::max(most, c.workspace);
  void* ws = most ? workspace(most) : nullptr;
  const int device = current_device();
  const std::unique_ptr<void, void (*)(Event)> start(event_create(device, true), event_destroy),
      end(event_create(device, true), event_destroy);
  Choice best = candidates.front();
  best.ms = -1.f;
  for (Choice& c : candidates) {
    run(c, ws);  // warm-up
    std::vector<float> ms(kRuns);
    for (float& m : ms) {
      event_record(start.get(), stream);
      run(c, ws);
      event_record(end.get(), stream);
      event_synchronize(end.get());
      m = event_elapsed_ms(start.get(), end.get());
    }
    std::nth_element(ms.begin(), ms.begin() + kRuns / 2, ms.end());
    c.ms = ms[kRuns / 2];
    if (best.ms < 0 || c.ms < best.ms) best = c;
  }
  return best;
}

// The result of a Find/Get call (sorted fastest first) that the rule admits.
template <typename Perf>
Choice first_ok(const Perf* perf, int count, bool deterministic, const char* what, const Conv2dShape& s,
                Layout layout, DType dtype) {
  const int i = pick_algorithm(perf, count, deterministic);
  if (i >= 0) return {int(perf[i].algo), perf[i].mathType, perf[i].memory, perf[i].time};
  throw Error(fmt::format("cuDNN has no {}{} algorithm for a {}x{} convolution of {}x{}x{}x{} ({}, {}){}",
                          deterministic ? "deterministic " : "", what, s.kh, s.kw, s.n, s.c_in, s.h, s.w,
                          layout == Layout::nhwc ? "NHWC" : "NCHW", dtype_name(dtype),
                          deterministic ? "; kernels.cudnn_deterministic=false admits the others" : ""));
}

template <typename Run>
Choice choose(cudnnHandle_t h, const Descs& d, const Conv2dShape& s, Layout layout, DType dtype, Dir dir,
              AlgoRule rule, const Run& run, const WorkspaceFn& workspace, Stream stream) {
  static std::mutex mutex;
  static std::map<Key, Choice> cache;
  const Key key = key_of(s, layout, dtype, dir, rule);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  constexpr int kMax = 16;
  int count = 0;
  Choice c;
  const bool timed = rule.search == AlgoSearch::timed;
  if (dir == Dir::forward) {
    cudnnConvolutionFwdAlgoPerf_t perf[kMax];
    if (timed) CG_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(h, d.x.get(), d.w, d.conv, d.y.get(), kMax, &count, perf));
    else CG_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x.get(), d.w, d.conv, d.y.get(), kMax, &count, perf));
    c = first_ok(perf, count, rule.deterministic, "forward", s, layout, dtype);
    if (timed) c = fastest_retimed(perf, count, rule, dtype, run, workspace, stream);
  } else if (dir == Dir::data) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[kMax];
    if (timed) CG_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(h, d.w, d.y.get(), d.conv, d.x.get(), kMax, &count, perf));
    else CG_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y.get(), d.conv, d.x.get(), kMax, &count, perf));
    c = first_ok(perf, count, rule.deterministic, "backward-data", s, layout, dtype);
    if (timed) c = fastest_retimed(perf, count, rule, dtype, run, workspace, stream);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[kMax];
    if (timed) CG_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(h, d.x.get(), d.y.get(), d.conv, d.w, kMax, &count, perf));
    else CG_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x.get(), d.y.get(), d.conv, d.w, kMax, &count, perf));
    c = first_ok(perf, count, rule.deterministic, "backward-filter", s, layout, dtype);
    if (timed) c = fastest_retimed(perf, count, rule, dtype, run, workspace, stream);
  }
  if (dtype == DType::f32) c.math = CUDNN_FMA_MATH;  // never TF32 for float32 data
  // CUDAGRAD_CUDNN_LOG=1 prints each choice: two runs of one binary on the H100 differed by 17% in
  // images/s, and the algorithms the timed search picks are the first suspect.
  static const bool log_choices = std::getenv("CUDAGRAD_CUDNN_LOG") != nullptr;
  if (log_choices)
    fmt::print(stderr, "cudnn: {} {}x{}x{}x{} -> {} k{} s{} {} {}: algo {}, math {}, {} B, {:.3f} ms\n",
               dir == Dir::forward ? "forward" : dir == Dir::data ? "backward-data" : "backward-filter", s.n, s.c_in,
               s.h, s.w, s.c_out, s.kh, s.stride, layout == Layout::nhwc ? "NHWC" : "NCHW", dtype_name(dtype), c.algo,
               int(c.math), c.workspace, c.ms);
  cache.emplace(key, c);
  return c;
}

// The hot path: a shape this host thread has run before takes no lock and builds no descriptor.
// Each thread keeps its own layers' descriptors (a descriptor is not safe to share while another
// thread sets its math type) and a copy of the choices it has used; only a shape new to the thread
// takes choose()'s process-wide lock, where the one search per shape is shared, so every thread runs
// the same algorithm for the same layer.
using LayerKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int>;

const Descs& layer_descs(const Conv2dShape& s, DType dtype, Layout layout) {
  thread_local std::map<LayerKey, std::unique_ptr<Descs>> layers;
  std::unique_ptr<Descs>& d =
      layers[{s.n, s.c_in, s.h, s.w, s.c_out, s.kh, s.kw, s.stride, s.pad, int(layout), int(dtype)}];
  if (!d) d = std::make_unique<Descs>(s, dtype, layout);
  return *d;
}

template <typename Run>
Choice cached_choice(cudnnHandle_t h, const Descs& d, const Conv2dShape& s, Layout layout, DType dtype, Dir dir,
                     AlgoRule rule, const Run& run, const WorkspaceFn& workspace, Stream stream) {
  thread_local std::map<Key, Choice> seen;
  const Key key = key_of(s, layout, dtype, dir, rule);
  if (auto it = seen.find(key); it != seen.end()) return it->second;
  const Choice c = choose(h, d, s, layout, dtype, dir, rule, run, workspace, stream);
  seen.emplace(key, c);
  return c;
}

void* scratch(const WorkspaceFn& workspace, size_t bytes) { return bytes ? workspace(bytes) : nullptr; }

}  // namespace

bool conv2d_cudnn_supports(const Conv2dShape& s, DType dtype) {
  return (dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16) &&
         s.n * s.c_in * s.h * s.w < (int64_t(1) << 31);
}

void conv2d_cudnn_forward(const Conv2dShape& s, DType dtype, const void* x, const void* w, const void* bias, void* y,
                          const WorkspaceFn& workspace, Stream stream, Layout layout, AlgoRule rule) {
  cudnnHandle_t h = cudnn::handle(stream);
  const Descs& d = layer_descs(s, dtype, layout);
  const float one = 1.f, zero = 0.f;  // scaling factors are float for every data type but double
  const auto run = [&](const Choice& c, void* ws) {
    CG_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv, c.math));
    CG_CUDNN_CHECK(cudnnConvolutionForward(h, &one, d.x.get(), x, d.w, w, d.conv, cudnnConvolutionFwdAlgo_t(c.algo),
                                           ws, c.workspace, &zero, d.y.get(), y));
  };
  const Choice c = cached_choice(h, d, s, layout, dtype, Dir::forward, rule, run, workspace, stream);
  run(c, scratch(workspace, c.workspace));
  if (bias) CG_CUDNN_CHECK(cudnnAddTensor(h, &one, d.bias.get(), bias, &one, d.y.get(), y));
}

void conv2d_cudnn_backward_data(const Conv2dShape& s, DType dtype, const void* dy, const void* w, void* dx,
                                const WorkspaceFn& workspace, Stream stream, Layout layout, AlgoRule rule) {
  cudnnHandle_t h = cudnn::handle(stream);
  const Descs& d = layer_descs(s, dtype, layout);
  const float one = 1.f, zero = 0.f;
  const auto run = [&](const Choice& c, void* ws) {
    CG_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv, c.math));
    CG_CUDNN_CHECK(cudnnConvolutionBackwardData(h, &one, d.w, w, d.y.get(), dy, d.conv,
                                                cudnnConvolutionBwdDataAlgo_t(c.algo), ws, c.workspace, &zero,
                                                d.x.get(), dx));
  };
  const Choice c = cached_choice(h, d, s, layout, dtype, Dir::data, rule, run, workspace, stream);
  run(c, scratch(workspace, c.workspace));
}

void conv2d_cudnn_backward_filter(const Conv2dShape& s, DType dtype, const void* x, const void* dy, void* dw,
                                  void* db, const WorkspaceFn& workspace, Stream stream, Layout layout,
                                  AlgoRule rule) {
  cudnnHandle_t h = cudnn::handle(stream);
  const Descs& d = layer_descs(s, dtype, layout);
  const float one = 1.f, zero = 0.f;
  const auto run = [&](const Choice& c, void* ws) {
    CG_CUDNN_CHECK(cudnnSetConvolutionMathType(d.conv, c.math));
    CG_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, &one, d.x.get(), x, d.y.get(), dy, d.conv,
                                                  cudnnConvolutionBwdFilterAlgo_t(c.algo), ws, c.workspace, &zero,
                                                  d.w, dw));
  };
  const Choice c = cached_choice(h, d, s, layout, dtype, Dir::filter, rule, run, workspace, stream);
  run(c, scratch(workspace, c.workspace));
  if (db) conv2d_bias_grad(s, dtype, dy, db, stream, layout);  // not cuDNN's: it refuses bfloat16
}

}  // namespace cg::kernels::cuda
