#include "nn/miniresnet.h"

#include "engine/ops.h"

namespace cg::nn {

namespace {

// PyTorch's BatchNorm2d defaults.
constexpr double kBnEps = 1e-5, kBnMomentum = 0.1;

std::shared_ptr<BatchNorm2d> batch_norm(int64_t channels) {
  return std::make_shared<BatchNorm2d>(channels, kBnEps, kBnMomentum);
}

}  // namespace

BasicBlock::BasicBlock(int64_t cin, int64_t cout, int64_t stride, Generator& gen) {
  conv1_ = register_module("conv1",
                           std::make_shared<Conv2d>(Conv2dOptions{.in_channels = cin,
                                                                  .out_channels = cout,
                                                                  .kernel_size = 3,
                                                                  .stride = stride,
                                                                  .padding = 1},
                                                    gen));
  bn1_ = register_module("bn1", batch_norm(cout));
  conv2_ =
      register_module("conv2", std::make_shared<Conv2d>(Conv2dOptions{.in_channels = cout,
                                                                      .out_channels = cout,
                                                                      .kernel_size = 3,
                                                                      .padding = 1},
                                                        gen));
  bn2_ = register_module("bn2", batch_norm(cout));
  if (stride != 1 || cin != cout) {
    auto down = register_module("downsample", std::make_shared<Sequential>());
    down_conv_ = std::make_shared<Conv2d>(Conv2dOptions{.in_channels = cin,
                                                        .out_channels = cout,
                                                        .kernel_size = 1,
                                                        .stride = stride},
                                          gen);
    down_bn_ = batch_norm(cout);
    down->append(down_conv_);
    down->append(down_bn_);
  }
}

Tensor BasicBlock::forward(const Tensor& x) {
  Tensor out = conv2_->forward(bn1_->forward_relu(conv1_->forward(x)));
  Tensor shortcut = down_conv_ ? down_bn_->forward(down_conv_->forward(x)) : x;
  // relu(bn2(out) + shortcut) in one pass: bn2's output is never stored on its own.
  return bn2_->forward_add_relu(out, shortcut);
}

void Sequential::append(std::shared_ptr<Module> m) {
  register_module(std::to_string(layers_.size()), m);
  layers_.push_back(std::move(m));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor out = x;
  for (auto& layer : layers_) out = (*layer)(out);  // through the hooks (dist/full_shard.h)
  return out;
}

MiniResNet::MiniResNet(const MiniResNetOptions& o, Generator& gen) : options_(o) {
  CG_CHECK(!o.widths.empty() && o.widths.size() == o.blocks.size(),
           "MiniResNet: widths ({}) and blocks ({}) need the same, non-zero length",
           o.widths.size(), o.blocks.size());
  // The stem reads the NCHW input as it comes: with 1 or 3 input channels, channels-last gives
  // tensor cores nothing to work with (cuDNN's NHWC kernels want channels in multiples of 8).
  conv1_ = register_module("conv1", std::make_shared<Conv2d>(
                                        Conv2dOptions{.in_channels = o.in_channels,
                                                      .out_channels = o.widths[0],
                                                      .kernel_size = 3,
                                                      .padding = 1},
                                        gen));
  bn1_ = register_module("bn1", batch_norm(o.widths[0]));
  int64_t cin = o.widths[0];
  for (size_t i = 0; i < o.widths.size(); ++i) {
    auto stage = register_module("layer" + std::to_string(i + 1), std::make_shared<Sequential>());
    for (int64_t j = 0; j < o.blocks[i]; ++j) {
      const int64_t stride = (i > 0 && j == 0) ? 2 : 1;
      stage->append(std::make_shared<BasicBlock>(cin, o.widths[i], stride, gen));
      cin = o.widths[i];
    }
    stages_.push_back(stage);
  }
  fc_ = register_module(
      "fc", std::make_shared<Linear>(LinearOptions{.in_features = cin, .out_features = o.num_classes}, gen));
}

double parameter_count(const MiniResNetOptions& o) {
  auto conv = [](double cin, double cout, double k) { return cin * cout * k * k; };  // no bias
  auto bn = [](double c) { return 2 * c; };  // weight and bias (running statistics are buffers)
  double n = conv(double(o.in_channels), double(o.widths.at(0)), 3) + bn(double(o.widths[0]));
  double cin = double(o.widths[0]);
  for (size_t i = 0; i < o.widths.size() && i < o.blocks.size(); ++i) {
    const double cout = double(o.widths[i]);
    const double blocks = double(o.blocks[i]);
    if (blocks < 1) continue;
    // The first block may change width or stride, and then has a 1x1 downsample; the others are alike.
    const bool downsample = i > 0 || cin != cout;
    n += conv(cin, cout, 3) + conv(cout, cout, 3) + 2 * bn(cout) + (downsample ? conv(cin, cout, 1) + bn(cout) : 0);
    n += (blocks - 1) * (2 * conv(cout, cout, 3) + 2 * bn(cout));
    cin = cout;
  }
  return n + cin * double(o.num_classes) + double(o.num_classes);  // the linear head, with bias
}

Tensor MiniResNet::forward(const Tensor& x) {
  CG_CHECK(x.dim() == 4 && x.size(1) == options_.in_channels,
           "MiniResNet expects [N, {}, H, W] input, got {}", options_.in_channels, x.str());
  // Data arrives NCHW, and the stem reads it so; under a channels-last context the stem's output is
  // converted once, and every layer after keeps NHWC.
  const ops::Layout layout = ops::execution().layout;
  Tensor stem;
  {
    ops::ExecutionScope nchw(ops::execution().with_layout(ops::Layout::nchw));
    stem = conv1_->forward(x);
  }
  Tensor out = bn1_->forward_relu(ops::to_layout(stem, ops::Layout::nchw, layout));
  for (auto& stage : stages_) out = (*stage)(out);
  return fc_->forward(ops::global_avg_pool(out));
}

}  // namespace cg::nn
