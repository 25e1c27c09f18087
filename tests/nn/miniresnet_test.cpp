// MiniResNet against shared/docs/miniresnet.md: state-dict keys, order, shapes and counts.
#include <gtest/gtest.h>

#include "nn/miniresnet.h"

namespace cg::nn {
namespace {

int64_t trainable(const Module& m) {
  int64_t n = 0;
  for (auto& [name, t] : m.named_parameters()) n += t.numel();
  return n;
}

TEST(MiniResNet, DefaultCountsMatchTheSpec) {
  Generator gen(0);
  MiniResNet model({}, gen);
  EXPECT_EQ(trainable(model), 2777674);
  EXPECT_EQ(model.named_parameters().size(), 47u);
  EXPECT_EQ(model.state_dict().size(), 92u);
}

TEST(MiniResNet, FashionMnistCounts) {
  Generator gen(0);
  MiniResNetOptions o;
  o.in_channels = 1;
  EXPECT_EQ(trainable(MiniResNet(o, gen)), 2776522);
  o.widths = {16, 32, 64};
  EXPECT_EQ(trainable(MiniResNet(o, gen)), 174970);
}

// The config refuses models too large to hold by this count, before building one: it must be the
// count the built model has, for shapes with and without a downsample in the first stage.
TEST(MiniResNet, ParameterCountWithoutBuildingMatchesTheBuiltModel) {
  Generator gen(0);
  const std::vector<MiniResNetOptions> shapes{
      {}, {1, 10, {16, 32, 64}, {2, 2, 2}}, {3, 7, {8}, {3}}, {3, 2, {4, 8, 8, 16}, {1, 3, 1, 2}}};
  for (const MiniResNetOptions& o : shapes) {
    const double counted = parameter_count(o);
    EXPECT_EQ(counted, double(trainable(MiniResNet(o, gen)))) << "widths " << o.widths.size() << " stages";
  }
  MiniResNetOptions huge;
  huge.blocks = {2, 2, 99999999999};  // issue 26's config: counted in a blink, never built
  EXPECT_GT(parameter_count(huge), 1e16);
}

TEST(MiniResNet, KeysFollowTorchvisionNaming) {
  Generator gen(0);
  MiniResNet model({}, gen);
  auto sd = model.state_dict();
  std::vector<std::string> keys;
  for (auto& [k, t] : sd) keys.push_back(k);
  const std::vector<std::string> head{"conv1.weight",          "bn1.weight",
                                      "bn1.bias",              "bn1.running_mean",
                                      "bn1.running_var",       "bn1.num_batches_tracked",
                                      "layer1.0.conv1.weight", "layer1.0.bn1.weight"};
  EXPECT_EQ(std::vector<std::string>(keys.begin(), keys.begin() + 8), head);
  EXPECT_EQ(keys[keys.size() - 2], "fc.weight");
  EXPECT_EQ(keys.back(), "fc.bias");
  auto find = [&](const std::string& k) -> Tensor {
    for (auto& [name, t] : sd)
      if (name == k) return t;
    ADD_FAILURE() << "missing key " << k;
    return Tensor();
  };
  EXPECT_EQ(find("layer2.0.downsample.0.weight").shape(), (Shape{128, 64, 1, 1}));
  EXPECT_EQ(find("layer3.0.downsample.1.running_var").shape(), (Shape{256}));
  EXPECT_EQ(find("layer3.1.conv2.weight").shape(), (Shape{256, 256, 3, 3}));
  EXPECT_EQ(find("fc.weight").shape(), (Shape{10, 256}));
  EXPECT_EQ(find("bn1.num_batches_tracked").dtype(), DType::i64);
  EXPECT_EQ(find("bn1.num_batches_tracked").dim(), 0);
  for (auto& k : keys) EXPECT_EQ(k.find("layer1.0.downsample"), std::string::npos) << k;
}

TEST(MiniResNet, ForwardShapeAndBatchNormBookkeeping) {
  Generator gen(1);
  MiniResNetOptions o;
  o.in_channels = 1;
  o.widths = {4, 8};
  o.blocks = {1, 1};
  MiniResNet model(o, gen);
  Tensor x = Tensor::empty({3, 1, 12, 12});
  normal_(x, gen, 0, 1);
  Tensor y = model(x);
  EXPECT_EQ(y.shape(), (Shape{3, 10}));
  for (auto& [k, t] : model.named_buffers()) {
    if (k.ends_with("num_batches_tracked")) {
      EXPECT_EQ(t.item(), 1.0) << k;
    }
  }
  model.eval();
  model(x);
  for (auto& [k, t] : model.named_buffers()) {
    if (k.ends_with("num_batches_tracked")) {
      EXPECT_EQ(t.item(), 1.0) << k;
    }
  }
}

TEST(MiniResNet, LoadStateDictIsStrictAndNamesKeys) {
  Generator gen(2);
  MiniResNetOptions o;
  o.widths = {4};
  o.blocks = {1};
  MiniResNet a(o, gen), b(o, gen);
  std::map<std::string, Tensor> values;
  for (auto& [k, t] : a.state_dict()) values[k] = t.clone();
  b.load_state_dict(values);
  for (auto& [k, t] : b.state_dict()) {
    const Tensor& src = values.at(k);
    EXPECT_EQ(0, std::memcmp(src.raw_data(), t.raw_data(), t.nbytes())) << k;
  }
  values.erase("fc.bias");
  try {
    b.load_state_dict(values);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fc.bias"), std::string::npos);
  }
  values["fc.bias"] = Tensor::zeros({3});
  EXPECT_THROW(b.load_state_dict(values), Error);
}

}  // namespace
}  // namespace cg::nn
