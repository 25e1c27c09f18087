// The convolution family's registry and its rule: which implementation runs a layer.
// conv_registry() holds the implementations this build has; conv_selection() turns a layer and its
// KernelPolicy into those that may run it, most preferred first, and pick_conv() takes the first
// that supports the layer.
//   CPU, channels-last: the channels-last convolution (which picks the NCHW one inside).
//   CPU, NCHW: kernels.cpu_conv's algorithm (auto: cpu_conv_auto's, per layer shape: the forward's;
//     the backward phases then as cpu_auto_backward says), then the im2col convolution for what
//     that algorithm does not run. The plain reference is registered
//     for the conformance suites and selected by no rule: it is far too slow to train with.
//   GPU: kernels.conv=cudnn or native by name (refused where it cannot run the layer); auto: per
//     layer, whichever of the two measured faster (the timed choice, below) under
//     kernels.cudnn_algo_search=timed, cuDNN first under heuristic.
//
// The GPU's timed choice (kernels.conv=auto, kernels.cudnn_algo_search=timed): cuDNN or the hand-written
// kernels, per layer, by measurement. Why: on the H200 (bench/NOTES.md, "The third GPU lease")
// cuDNN's deterministic algorithms took 0.5-1 ms for each backward pass of the 1x1 stride-2
// shortcuts and for the stem's backward-filter, about half of a 7.9 ms step, where the native
// kernels ran the same passes 2-30x faster; on the 3x3 layers cuDNN was the faster. Which of the two
// wins depends on the GPU, the cuDNN version and the shape, so it is timed on the layer itself, the
// way cuDNN's own search times its algorithms (and torch.backends.cudnn.benchmark does).
//
// Each candidate runs the layer's forward and both backward passes (the input gradient too: the
// problem does not say whether it is needed) on scratch tensors: once to warm up (cuDNN's own
// algorithm search happens there), then kRuns times between two timing events; the median counts.
// The native kernels go first only when they beat cuDNN by kNativeMargin (conv.h), so that a close
// call stays on cuDNN instead of flipping between runs with the timing noise. The choice is made once per process
// for the shape, dtype, layout, device and determinism rule (under a lock: every thread, rank
// threads included, then runs the same implementation for the same layer, as with cuDNN's own
// algorithm choice), and each thread keeps a copy to read without the lock.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include <fmt/core.h>

#include "engine/conv/conv.h"
#include "engine/conv/conv_cpu_tensors.h"
#include "engine/runtime.h"
#include "engine/stream.h"
#include "kernels/backend.h"
#include "kernels/cpu_conv/auto_rule.h"

namespace cg::impl {

// The GPU's implementations only in a build with CUDA kernels (nvcc's, or the emulated GPU's), and
// cuDNN's only where cuDNN is linked: entries() lists what can run.
ConvRegistry& conv_registry() {
  static ConvRegistry* registry = [] {
    std::vector<ConvEntry> entries{conv_im2col_entry(),           conv_winograd_entry(),
                                   conv_winograd2_entry(),        conv_direct_entry(),
                                   conv_cpu_channels_last_entry(), conv_reference_entry()};
    if constexpr (kernels::kCudaBuild) {
      entries.push_back(conv_native_channels_last_entry());
      entries.push_back(conv_native_entry());
    }
    if constexpr (kernels::kCudaLibraries) entries.push_back(conv_cudnn_entry());
    return new ConvRegistry("conv", std::move(entries));  // never destroyed: ops may run during static destruction
  }();
  return *registry;
}

std::shared_ptr<const ConvImpl> pick_conv(const ConvProblem& p) {
  return conv_registry().pick(p, conv_selection(p), p.layer);
}


// --- The rule ---

namespace {

using ops::CpuConvAlgorithm;
using ops::GpuImpl;

ImplKey cpu_key(CpuConvAlgorithm algorithm) {
  switch (algorithm) {
    case CpuConvAlgorithm::winograd: return ImplKey::winograd;
    case CpuConvAlgorithm::winograd2: return ImplKey::winograd2;
    case CpuConvAlgorithm::direct: return ImplKey::direct;
    default: return ImplKey::im2col;
  }
}

Selection cpu_selection(const ConvProblem& p) {
  if (p.layout == ops::Layout::nhwc) return {.keys = {ImplKey::channels_last}};
  const CpuConvAlgorithm algorithm =
      p.policy.cpu_conv == CpuConvAlgorithm::automatic ? cpu_conv_auto(p.shape, p.dtype) : p.policy.cpu_conv;
  return {.keys = {cpu_key(algorithm), ImplKey::im2col}};
}

Selection gpu_selection(const ConvProblem& p) {
  switch (p.policy.conv) {
    case GpuImpl::cudnn: return {.keys = {ImplKey::cudnn}, .choice = "cudnn", .named = true};
    case GpuImpl::native: return {.keys = {ImplKey::native}, .choice = "native", .named = true};
    case GpuImpl::automatic: break;
  }
  if (p.policy.cudnn_algo_search == ops::ConvAlgoSearch::timed) return timed_gpu_selection(p);
  return {.keys = {ImplKey::cudnn, ImplKey::native}};
}

}  // namespace

// The shapes' rule is the fast convolutions' own (kernels/cpu_conv/auto_rule.h); the dtype is the
// engine's to check.
CpuConvAlgorithm cpu_conv_auto(const kernels::Conv2dShape& s, DType dtype) {
  if (dtype != DType::f32) return CpuConvAlgorithm::im2col;  // Winograd and direct run float32 only
  switch (kernels::cpu::fastest_exact_conv(s)) {
    case kernels::cpu::ExactConv::direct: return CpuConvAlgorithm::direct;
    case kernels::cpu::ExactConv::winograd2: return CpuConvAlgorithm::winograd2;
    case kernels::cpu::ExactConv::im2col: break;
  }
  return CpuConvAlgorithm::im2col;
}

Selection conv_selection(const ConvProblem& p) { return p.device.is_cpu() ? cpu_selection(p) : gpu_selection(p); }


// --- The GPU's timed choice ---

namespace {

constexpr int kRuns = 5;

// The forward and both backward passes of `impl` on `p`'s shapes, in milliseconds (median of kRuns).
double median_pass_ms(const ConvImpl& impl, const ConvProblem& p) {
  const kernels::Conv2dShape& s = p.shape;
  const bool nhwc = p.layout == ops::Layout::nhwc;
  const Tensor x = Tensor::zeros(nhwc ? Shape{s.n, s.h, s.w, s.c_in} : Shape{s.n, s.c_in, s.h, s.w}, p.dtype, p.device);
  const Tensor w = Tensor::zeros({s.c_out, s.c_in, s.kh, s.kw}, DType::f32, p.device);  // the master weight
  const Shape y_shape = nhwc ? Shape{s.n, s.out_h(), s.out_w(), s.c_out} : Shape{s.n, s.c_out, s.out_h(), s.out_w()};
  const Tensor dy = Tensor::zeros(y_shape, p.dtype, p.device);
  const auto pass = [&] {
    ConvForwardArgs f{.x = x, .w = w};
    impl.forward(p, f);
    ConvBackwardArgs b{.dy = dy, .saved = std::move(f.saved)};
    impl.backward(p, b);
  };
  const Stream stream = current_stream(p.device);
  pass();
  Event start = Event::create(p.device, {.timing = true}), end = Event::create(p.device, {.timing = true});
  std::vector<double> ms;
  for (int i = 0; i < kRuns; ++i) {
    start.record(stream);
    pass();
    end.record(stream);
    end.synchronize();
    ms.push_back(Event::elapsed_ms(start, end));
  }
  std::nth_element(ms.begin(), ms.begin() + kRuns / 2, ms.end());
  return ms[kRuns / 2];
}

using ChoiceKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, DType,
                             ops::Layout, int, bool>;

ChoiceKey key_of(const ConvProblem& p) {
  const kernels::Conv2dShape& s = p.shape;
  return {s.n, s.c_in, s.h, s.w, s.c_out, s.kh, s.kw, s.stride, s.pad, p.dtype, p.layout, p.device.index,
          p.policy.cudnn_deterministic};
}

void log_choice(const ConvProblem& p, double cudnn_ms, double native_ms, bool native) {
  static const bool log_choices = std::getenv("CUDAGRAD_CUDNN_LOG") != nullptr;
  if (!log_choices) return;
  const kernels::Conv2dShape& s = p.shape;
  fmt::print(stderr,
             "conv auto: {}x{}x{}x{} -> {} k{} s{} {} {}: cudnn {:.3f} ms, native {:.3f} ms (forward and both "
             "backward passes, median of {}) -> {}\n",
             s.n, s.c_in, s.h, s.w, s.c_out, s.kh, s.stride, p.layout == ops::Layout::nhwc ? "NHWC" : "NCHW",
             dtype_name(p.dtype), cudnn_ms, native_ms, kRuns, native ? "native" : "cudnn");
}

}  // namespace

bool native_measured_faster(double cudnn_ms, double native_ms) { return native_ms * kNativeMargin < cudnn_ms; }

Selection timed_gpu_selection(const ConvProblem& p) {
  static const Selection cudnn_first{.keys = {ImplKey::cudnn, ImplKey::native}};
  static const Selection native_first{.keys = {ImplKey::native, ImplKey::cudnn}};
  const ChoiceKey key = key_of(p);
  thread_local std::map<ChoiceKey, bool> seen;  // this thread's copy: the hot path takes no lock
  if (auto it = seen.find(key); it != seen.end()) return it->second ? native_first : cudnn_first;
  static std::mutex mutex;
  static std::map<ChoiceKey, bool> chosen;  // native_wins per layer, for the whole process
  std::lock_guard<std::mutex> lock(mutex);
  auto it = chosen.find(key);
  if (it == chosen.end()) {
    // While a stream is captured nothing runs, so nothing can be timed: the default, not
    // remembered (the trainer's eager steps before a capture have timed every layer already).
    if (runtime::is_capturing(current_stream(p.device))) return cudnn_first;
    const auto cudnn = conv_registry().first_supporting(p, ImplKey::cudnn);
    const auto native = conv_registry().first_supporting(p, ImplKey::native);
    bool native_wins = cudnn == nullptr;
    if (cudnn && native) {
      const double cudnn_ms = median_pass_ms(*cudnn, p), native_ms = median_pass_ms(*native, p);
      native_wins = native_measured_faster(cudnn_ms, native_ms);
      log_choice(p, cudnn_ms, native_ms, native_wins);
    }
    it = chosen.emplace(key, native_wins).first;
  }
  seen.emplace(key, it->second);
  return it->second ? native_first : cudnn_first;
}

}  // namespace cg::impl
