// The bound model of one MiniResNet training step (issue 28, item 3, "the machine's limit"):
// every pass of the step -- each convolution's forward, backward-data and backward-filter, batch
// norm with its fused ReLU and residual add, the gradient sums where a tensor feeds two layers,
// pooling, the linear head, the loss, the optimizer -- with the floating-point operations and
// the bytes it needs, counted from the network's shapes, and the least time it can take on a
// machine of given peaks: max(FLOPs / compute peak, bytes / memory bandwidth).
// Bytes are compulsory traffic: each tensor a pass reads or writes crosses memory once, except
// that batch norm reads its input twice (the statistics must be complete before any value is
// normalized). Caches can do better for tensors that fit in them; the model does not count on it.
// Header-only, so that tests/bench/step_bound_test.cpp checks the counts without the benchmark.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu_conv/winograd_transforms.h"
#include "kernels/types.h"

namespace cg::bench::bound {

using kernels::Conv2dShape;

// MiniResNet as nn/miniresnet.h builds it (no max-pool: the stem keeps the input's size).
struct Network {
  std::vector<int64_t> widths{64, 128, 256};
  std::vector<int64_t> blocks{2, 2, 2};
  int64_t in_channels = 1, image = 28, batch = 64, classes = 10;
  bool channels_last = false;  // the GPU config: the stem's output changes layout, both ways
};

struct ConvLayer {
  std::string name;  // the parameter's prefix: "conv1", "layer2.0.downsample.0", ...
  Conv2dShape shape;
};

// Every convolution of the network, in forward order.
inline std::vector<ConvLayer> conv_layers(const Network& net) {
  std::vector<ConvLayer> layers;
  auto add = [&](std::string name, int64_t cin, int64_t size, int64_t cout, int64_t k, int64_t stride) {
    layers.push_back({std::move(name), Conv2dShape{net.batch, cin, size, size, cout, k, k, stride, k / 2}});
  };
  int64_t size = net.image, cin = net.widths.at(0);
  add("conv1", net.in_channels, size, cin, 3, 1);
  for (size_t i = 0; i < net.widths.size(); ++i)
    for (int64_t j = 0; j < net.blocks.at(i); ++j) {
      const int64_t cout = net.widths[i], stride = (i > 0 && j == 0) ? 2 : 1;
      const std::string block = "layer" + std::to_string(i + 1) + "." + std::to_string(j);
      add(block + ".conv1", cin, size, cout, 3, stride);
      const int64_t out = layers.back().shape.out_h();
      if (stride != 1 || cin != cout) add(block + ".downsample.0", cin, size, cout, 1, stride);
      add(block + ".conv2", cout, out, cout, 3, 1);
      cin = cout, size = out;
    }
  return layers;
}

// "layer2.0" of "layer2.0.downsample.0": the block a layer belongs to.
inline std::string block_of(const std::string& name) {
  const size_t first = name.find('.');
  return first == std::string::npos ? name : name.substr(0, name.find('.', first + 1));
}

enum class ConvPhase { forward, backward_data, backward_filter };
inline const char* phase_name(ConvPhase p) {
  return p == ConvPhase::forward ? "fwd" : p == ConvPhase::backward_data ? "bwd-data" : "bwd-filter";
}

// The direct (and im2col) count: a multiply-add per filter tap per output value, the same in all
// three phases.
inline double direct_conv_flops(const Conv2dShape& s) {
  return 2.0 * double(s.n * s.c_out * s.c_in * s.kh * s.kw * s.out_h() * s.out_w());
}

// What kernels/cpu_conv/winograd.cpp's F(4x4, 3x3) does, counted from its 1-D passes (a multiply, an
// add: 1 each). Per pass: B^T (input, 6 -> 6) 28, A (output gradient, 4 -> 6) 11, A^T (output,
// 6 -> 4) 13, G (filter, 3 -> 6) 17, G^T (filter gradient, 6 -> 3) 17. Not counted: the
// zero-padded columns of a GEMM's last panel, and backward-filter's sum over its slots (at most
// 3 x 36 per filter weight, under 0.5% of any layer's GEMM).
namespace winograd_count {
using namespace kernels::cpu::winograd;  // the kernel's own tile, element and lane constants
constexpr double kInputPass = 28, kGradPass = 11, kOutputPass = 13, kFilterPass = 17;
constexpr int kElements = Tile<4>::kElements;
constexpr int64_t kLanesMaxTiles = kLanesMaxPixels / (Tile<4>::kTile * Tile<4>::kTile);
inline int64_t tiles_along(int64_t n) { return kernels::cpu::winograd::tiles_along(n, Tile<4>::kTile); }

// One plane's input transform. 16 planes at a time (input_transform_lanes: channels in groups of
// 16, planes of at most kLanesMaxTiles tiles -- every MiniResNet layer Winograd runs): 6 vertical
// and 6 horizontal passes per tile. Plane by plane (input_transform): neighbouring tiles share 2
// columns, so the vertical pass runs on 4 columns per tile plus 4 per tile row.
inline double input_plane(int64_t th, int64_t tw, int64_t channels) {
  const bool lanes = th * tw <= kLanesMaxTiles && channels % kLanes == 0;
  return kInputPass * double(lanes ? th * tw * 12 : th * 4 * (tw + 1) + th * tw * 6);
}
inline double grad_tile() { return kGradPass * (4 + 6); }           // 4 columns, then 6 rows (no overlap)
inline double output_tile() { return kOutputPass * (6 + 4) + 16; }  // + the bias, added to every output
inline double filter() { return kFilterPass * (3 + 6); }             // G g G^T: 3 columns, then 6 rows
inline double filter_adjoint() { return kFilterPass * (6 + 3); }
}  // namespace winograd_count

struct WinogradFlops {
  double transforms = 0, gemm = 0;
  double total() const { return transforms + gemm; }
};

// Backward-data runs as a forward of dy (c_out planes) into dx (c_in planes) with padding 2 - pad.
inline WinogradFlops winograd_flops(const Conv2dShape& s, ConvPhase phase) {
  namespace w = winograd_count;
  const bool data = phase == ConvPhase::backward_data;
  const int64_t oh = data ? s.h : s.out_h(), ow = data ? s.w : s.out_w();
  const int64_t th = w::tiles_along(oh), tw = w::tiles_along(ow), tiles = s.n * th * tw;
  const double filters = double(s.c_out * s.c_in);
  WinogradFlops f;
  f.gemm = 2.0 * w::kElements * filters * double(tiles);
  const int64_t in_channels = data ? s.c_out : s.c_in;
  const double input = double(s.n * in_channels) * w::input_plane(th, tw, in_channels);
  if (phase == ConvPhase::backward_filter) {
    f.transforms = input + double(tiles * s.c_out) * w::grad_tile() +
                   filters * w::filter_adjoint();
  } else {
    const int64_t out_channels = data ? s.c_in : s.c_out;
    f.transforms = input + double(tiles * out_channels) * w::output_tile() +
                   filters * w::filter();
  }
  return f;
}

// Compulsory bytes of one convolution phase: its two operands read and its result written once.
inline double conv_bytes(const Conv2dShape& s, ConvPhase phase, double value_bytes) {
  const double x = double(s.n * s.c_in * s.h * s.w), y = double(s.n * s.c_out * s.out_h() * s.out_w());
  const double w = double(s.c_out * s.c_in * s.kh * s.kw);
  return value_bytes * (phase == ConvPhase::forward ? x + w + y : phase == ConvPhase::backward_data ? y + w + x : x + y + w);
}

// One pass of the step.
struct Pass {
  std::string layer, phase, algorithm;  // algorithm: the convolution kernel that runs it, else ""
  double flops = 0;                     // as run (Winograd's where it runs)
  double direct_flops = 0;              // the direct count (= flops for everything but Winograd)
  double bytes = 0;
  ConvPhase conv_phase = ConvPhase::forward;
  int conv_index = -1;  // into conv_layers(), for the convolution passes
};

// An elementwise pass over `elements` values: `reads` and `writes` tensors of that size.
inline Pass elementwise(std::string layer, std::string phase, double elements, double reads, double writes,
                        double flops_per_element, double value_bytes) {
  Pass p{std::move(layer), std::move(phase), "", flops_per_element * elements, 0, 0};
  p.direct_flops = p.flops;
  p.bytes = value_bytes * elements * (reads + writes);
  return p;
}

// Batch norm's passes as cudagrad fuses them (nn/miniresnet.cpp): bn1 with the ReLU after it,
// bn2 with the residual add and the ReLU, the downsample's bn alone. Forward: a statistics pass
// reading x, then a pass reading x (and the shortcut) and writing y. Backward: a reduction pass
// reading dy, x (and y for the ReLU's mask), then one reading them again and writing dx (and,
// with the add, the shortcut's gradient). FLOPs per value: statistics 3, normalize 2, ReLU 1,
// add 1; backward reductions 4, dx 5, mask 1.
enum class BnKind { plain, relu, add_relu };
inline std::vector<Pass> batch_norm_passes(const std::string& layer, const Conv2dShape& conv, BnKind kind,
                                           double value_bytes) {
  const double n = double(conv.n * conv.c_out * conv.out_h() * conv.out_w());
  const double masked = kind == BnKind::plain ? 0 : 1, added = kind == BnKind::add_relu ? 1 : 0;
  return {elementwise(layer, "bn fwd", n, 2 + added, 1, 5 + masked + added, value_bytes),
          elementwise(layer, "bn bwd", n, 4 + 2 * masked, 1 + added, 9 + masked, value_bytes)};
}

// A convolution's three phases (the stem's input needs no gradient: no backward-data), counted
// as Winograd where "cpu winograd" runs it, else directly.
inline void add_conv_passes(const ConvLayer& c, int index, const std::string& algorithm, double value_bytes,
                            std::vector<Pass>& passes) {
  for (ConvPhase phase : {ConvPhase::forward, ConvPhase::backward_data, ConvPhase::backward_filter}) {
    if (index == 0 && phase == ConvPhase::backward_data) continue;
    Pass p{c.name, phase_name(phase), algorithm, 0, direct_conv_flops(c.shape), conv_bytes(c.shape, phase, value_bytes),
           phase, index};
    p.flops = algorithm == "cpu winograd" ? winograd_flops(c.shape, phase).total() : p.direct_flops;
    passes.push_back(p);
  }
}

// What follows a convolution: its batch norm (fused as batch_norm_passes says), the stem's
// layout change on a channels-last network, and at each block's first convolution the sum of
// the block input's two gradients (it feeds conv1 and the shortcut; reads 2, writes 1).
inline void add_layer_passes(const Network& net, const ConvLayer& c, double value_bytes, std::vector<Pass>& passes) {
  const bool second = c.name.ends_with(".conv2"), down = c.name.ends_with(".downsample.0");
  const std::string block = block_of(c.name);
  const std::string bn = c.name == "conv1" ? "bn1" : block + (down ? ".downsample.1" : second ? ".bn2" : ".bn1");
  for (Pass& p : batch_norm_passes(bn, c.shape, second ? BnKind::add_relu : down ? BnKind::plain : BnKind::relu,
                                   value_bytes))
    passes.push_back(p);
  const double x = double(c.shape.n * c.shape.c_in * c.shape.h * c.shape.w);
  const double y = double(c.shape.n * c.shape.c_out * c.shape.out_h() * c.shape.out_w());
  if (c.name == "conv1" && net.channels_last) {  // NCHW -> NHWC after the stem, and its gradient back
    passes.push_back(elementwise("conv1", "layout fwd", y, 1, 1, 0, value_bytes));
    passes.push_back(elementwise("conv1", "layout bwd", y, 1, 1, 0, value_bytes));
  }
  if (c.name.ends_with(".conv1")) passes.push_back(elementwise(block, "grad sum", x, 2, 1, 1, value_bytes));
}

// Global average pooling, the linear head (three small GEMMs) and the loss.
inline void add_head_passes(const Network& net, const Conv2dShape& last, double value_bytes, std::vector<Pass>& passes) {
  const double features = double(last.n * last.c_out * last.out_h() * last.out_w());
  passes.push_back(elementwise("avgpool", "fwd", features, 1, 0, 1, value_bytes));
  passes.push_back(elementwise("avgpool", "bwd", features, 0, 1, 1, value_bytes));
  const double fc_weights = double(last.c_out * net.classes + net.classes);
  for (const char* phase : {"fwd", "bwd-data", "bwd-weights"}) {
    Pass p = elementwise("fc", phase, double(net.batch * (last.c_out + net.classes)) + fc_weights, 1, 0, 0, value_bytes);
    p.flops = p.direct_flops = 2.0 * double(net.batch * last.c_out * net.classes);
    passes.push_back(p);
  }
  passes.push_back(elementwise("loss", "fwd+bwd", double(net.batch * net.classes), 2, 1, 8, value_bytes));
}

// Trainable parameters: convolution weights, batch norm's weight and bias, the head's weight and bias.
inline double parameter_count(const Network& net, const std::vector<ConvLayer>& convs) {
  double n = 0;
  for (const ConvLayer& c : convs) n += double(c.shape.c_out * (c.shape.c_in * c.shape.kh * c.shape.kw + 2));
  return n + double(convs.back().shape.c_out * net.classes + net.classes);
}

// SGD with momentum, Nesterov and weight decay reads the parameter, its gradient and momentum and
// writes parameter and momentum (8 FLOPs: decay, momentum, Nesterov, step); zeroing the gradients
// writes them once more. fp32 on every device; with mixed precision (2-byte values) autocast also
// casts the weights once a step (reads 4 bytes, writes 2).
inline void add_optimizer_passes(double params, double value_bytes, std::vector<Pass>& passes) {
  passes.push_back(elementwise("optimizer", "sgd update", params, 3, 2, 8, 4));
  passes.push_back(elementwise("optimizer", "zero grad", params, 0, 1, 0, 4));
  if (value_bytes < 4) {
    Pass cast = elementwise("autocast", "weight cast", params, 0, 0, 0, 4);
    cast.bytes = params * (4 + value_bytes);
    passes.push_back(cast);
  }
}

// Every pass of one training step, in the order of the forward (a layer's backward passes
// beside its forward ones), then the optimizer. `algorithm_of(conv index, layer)` names the
// kernel that runs a convolution.
template <class AlgorithmOf>
std::vector<Pass> step_passes(const Network& net, double value_bytes, const AlgorithmOf& algorithm_of) {
  const std::vector<ConvLayer> convs = conv_layers(net);
  std::vector<Pass> passes;
  for (size_t i = 0; i < convs.size(); ++i) {
    add_conv_passes(convs[i], int(i), algorithm_of(int(i), convs[i]), value_bytes, passes);
    add_layer_passes(net, convs[i], value_bytes, passes);
  }
  add_head_passes(net, convs.back().shape, value_bytes, passes);
  add_optimizer_passes(parameter_count(net, convs), value_bytes, passes);
  return passes;
}

// The machine's limits: compute in GFLOP/s, memory in GB/s (1e9 bytes).
struct Peaks {
  double gflops = 0, gbs = 0;
};

// The least time of a pass in microseconds, and which limit sets it.
inline double compute_us(const Pass& p, const Peaks& k) { return p.flops / (k.gflops * 1e3); }
inline double memory_us(const Pass& p, const Peaks& k) { return p.bytes / (k.gbs * 1e3); }
inline double bound_us(const Pass& p, const Peaks& k) { return std::max(compute_us(p, k), memory_us(p, k)); }
// The same with the convolutions' direct count: the bound of an engine without Winograd.
inline double direct_bound_us(const Pass& p, const Peaks& k) {
  return std::max(p.direct_flops / (k.gflops * 1e3), memory_us(p, k));
}

}  // namespace cg::bench::bound
