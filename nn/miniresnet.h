// MiniResNet, exactly as shared/docs/miniresnet.md: a 3x3 stem, stages of BasicBlocks (the first
// block of every stage after the first strides by 2), global average pooling and a linear head.
// Parameter names match torchvision's ResNet, so state dicts load into the PyTorch model.
#pragma once
#include <memory>
#include <vector>

#include "nn/layers.h"

namespace cg::nn {

struct MiniResNetOptions {
  int64_t in_channels = 3;
  int64_t num_classes = 10;
  std::vector<int64_t> widths{64, 128, 256};
  std::vector<int64_t> blocks{2, 2, 2};
};

// How many trainable parameters MiniResNet(options) has, worked out from the shapes without
// building it, so that a config asking for a model too large to hold can be refused before any
// allocation. A double: a config's widths and blocks can ask for more than int64 holds.
double parameter_count(const MiniResNetOptions& options);

class BasicBlock : public Module {
 public:
  BasicBlock(int64_t in_channels, int64_t out_channels, int64_t stride, Generator& gen);
  Tensor forward(const Tensor& x) override;

 private:
  std::shared_ptr<Conv2d> conv1_, conv2_, down_conv_;
  std::shared_ptr<BatchNorm2d> bn1_, bn2_, down_bn_;
};

// A container whose children are named "0", "1", ... and run in order (torch.nn.Sequential).
class Sequential : public Module {
 public:
  void append(std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

class MiniResNet : public Module {
 public:
  MiniResNet(const MiniResNetOptions& options, Generator& gen);
  Tensor forward(const Tensor& x) override;  // [N, in_channels, H, W] -> logits [N, num_classes]
  const MiniResNetOptions& options() const { return options_; }

 private:
  MiniResNetOptions options_;
  std::shared_ptr<Conv2d> conv1_;
  std::shared_ptr<BatchNorm2d> bn1_;
  std::vector<std::shared_ptr<Sequential>> stages_;
  std::shared_ptr<Linear> fc_;
};

// A residual block: what dist.sharding=full_shard makes a unit of its own (FSDP's auto-wrap
// policy for a ResNet). The stem and the head stay with the root.
inline bool is_residual_block(const Module& m) { return dynamic_cast<const BasicBlock*>(&m) != nullptr; }

}  // namespace cg::nn
