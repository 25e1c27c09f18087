// The implementation registries (engine/impl/): a fake convolution registered in one place is
// picked by ops::conv2d and its backward runs the fake too, even after it is unregistered; named
// choices and refusals name the layer. No GPU needed: GPU problems are only asked about.
#include <gtest/gtest.h>

#include <atomic>

#include "engine/impl/batch_norm.h"
#include "engine/impl/conv.h"
#include "engine/ops.h"
#include "support/messages.h"

namespace cg {
namespace {

std::atomic<int> fake_forwards{0}, fake_backwards{0};

// Outputs a constant 2 and gradients of constant 7 (dx) and 3 (dw, db): unmistakable.
class FakeConv : public impl::ConvImpl {
 public:
  std::string why_unsupported(const impl::ConvProblem& p) const override {
    return p.dtype == DType::f64 ? "" : "only float64";
  }
  Tensor forward(const impl::ConvProblem& p, const Tensor& x, const Tensor& w, const Tensor&,
                 impl::ConvSaved& saved) const override {
    ++fake_forwards;
    saved = {x.detach(), w.detach(), w.dtype()};
    const auto& s = p.shape;
    return Tensor::full({s.n, s.c_out, s.out_h(), s.out_w()}, 2.0, x.dtype());
  }
  impl::ConvGrads backward(const impl::ConvProblem& p, const impl::ConvSaved& saved, const Tensor&, bool need_dx,
                           bool need_w, bool has_bias) const override {
    ++fake_backwards;
    impl::ConvGrads g;
    if (need_dx) g.dx = Tensor::full(saved.x.shape(), 7.0, saved.x.dtype());
    if (need_w) g.dw = Tensor::full(saved.w.shape(), 3.0, saved.weight_dtype);
    if (need_w && has_bias) g.db = Tensor::full({p.shape.c_out}, 3.0, saved.x.dtype());
    return g;
  }
};

struct ConvCall {
  Tensor x = Tensor::full({1, 2, 4, 4}, 1.0, DType::f64).set_requires_grad(true);
  Tensor w = Tensor::full({3, 2, 3, 3}, 0.5, DType::f64).set_requires_grad(true);
  Tensor b = Tensor::full({3}, 0.25, DType::f64).set_requires_grad(true);
  Tensor run() { return ops::conv2d(x, w, b, {.stride = 1, .padding = 1}); }
};

TEST(ImplRegistry, AFakeConvolutionIsPickedAndRunsTheBackward) {
  fake_forwards = fake_backwards = 0;
  ConvCall call;
  Tensor y;
  {
    auto handle = impl::conv_registry().add(
        {"fake", DeviceType::cpu, impl::Choice::automatic, 100, std::make_shared<FakeConv>()});
    y = call.run();
  }  // unregistered here: the node must still hold the fake
  EXPECT_EQ(fake_forwards.load(), 1);
  EXPECT_EQ(y.to_vector<double>()[0], 2.0);
  y.backward(Tensor::full(y.shape(), 1.0, DType::f64));
  EXPECT_EQ(fake_backwards.load(), 1);
  EXPECT_EQ(call.x.grad().to_vector<double>()[5], 7.0);
  EXPECT_EQ(call.w.grad().to_vector<double>()[0], 3.0);
  EXPECT_EQ(call.b.grad().to_vector<double>()[2], 3.0);

  ConvCall again;  // the reference is back
  EXPECT_NE(again.run().to_vector<double>()[5], 2.0);
  EXPECT_EQ(fake_forwards.load(), 1);
}

TEST(ImplRegistry, AFakeThatDoesNotFitIsPassedOver) {
  fake_forwards = 0;
  auto handle = impl::conv_registry().add(
      {"fake", DeviceType::cpu, impl::Choice::automatic, 100, std::make_shared<FakeConv>()});
  Tensor x = Tensor::full({1, 2, 4, 4}, 1.0, DType::f32);
  Tensor w = Tensor::full({3, 2, 3, 3}, 0.5, DType::f32);
  ops::conv2d(x, w, Tensor(), {});
  EXPECT_EQ(fake_forwards.load(), 0);  // float32: the fake refuses, the reference runs
}

TEST(ImplRegistry, NoImplementationRefusesNamingTheLayer) {
  Tensor x = Tensor::zeros({1, 2, 4, 4}, DType::f16);
  Tensor w = Tensor::zeros({3, 2, 3, 3}, DType::f16);
  try {
    ops::conv2d(x, w, Tensor(), {});
    FAIL() << "a float16 convolution ran on the CPU";
  } catch (const Error& e) {
    test::expect_mentions(e.what(), {"conv2d layer", "[1, 2, 4, 4]", "[3, 2, 3, 3]", "float16", "cpu",
                                     "float32 and float64"});
  }
}

// A fake that takes NCHW float64 only, like the CPU reference.
class FakeNchwConv : public FakeConv {
 public:
  std::string why_unsupported(const impl::ConvProblem& p) const override {
    return p.layout == ops::Layout::nchw ? FakeConv::why_unsupported(p) : "NCHW only";
  }
};

TEST(ImplRegistry, ChannelsLastCpuTensorsGetTheChannelsLastConvolutionAroundTheNchwOne) {
  impl::ConvProblem p;
  p.shape = {1, 2, 4, 4, 3, 3, 3, 1, 1};
  p.device = Device::cpu();
  p.dtype = DType::f32;
  p.layer = "conv2d layer under test";
  auto& registry = impl::conv_registry();
  p.layout = ops::Layout::nhwc;
  EXPECT_EQ(registry.name_of(registry.pick(p, impl::Choice::automatic, p.layer).get()), "cpu channels-last");
  p.layout = ops::Layout::nchw;  // a 2-channel 3x3 float32 layer: auto's direct convolution
  EXPECT_EQ(registry.name_of(registry.pick(p, impl::Choice::automatic, p.layer).get()), "cpu direct");
  p.dtype = DType::f64;
  EXPECT_EQ(registry.name_of(registry.pick(p, impl::Choice::automatic, p.layer).get()), "cpu reference");
  p.dtype = DType::f32;

  // Inside, it runs the NCHW convolution the registry holds (here a fake), forward and backward.
  fake_forwards = fake_backwards = 0;
  auto handle = registry.add({"fake nchw", DeviceType::cpu, impl::Choice::automatic, 100, std::make_shared<FakeNchwConv>()});
  ConvCall call;
  const Tensor x_nhwc = ops::to_layout(call.x.detach(), ops::Layout::nchw, ops::Layout::nhwc).set_requires_grad(true);
  Tensor y = ops::conv2d(x_nhwc, call.w, call.b, {.stride = 1, .padding = 1, .layout = ops::Layout::nhwc});
  EXPECT_EQ(fake_forwards.load(), 1);
  EXPECT_EQ(y.shape(), (Shape{1, 4, 4, 3}));  // back in channels-last
  y.backward(Tensor::full(y.shape(), 1.0, DType::f64));
  EXPECT_EQ(fake_backwards.load(), 1);
  EXPECT_EQ(x_nhwc.grad().shape(), (Shape{1, 4, 4, 2}));
  EXPECT_EQ(x_nhwc.grad().to_vector<double>()[5], 7.0);
  EXPECT_EQ(call.w.grad().to_vector<double>()[0], 3.0);
}

impl::ConvProblem gpu_conv(ops::Layout layout) {
  impl::ConvProblem p;
  p.shape = {8, 16, 32, 32, 16, 3, 3, 1, 1};
  p.device = Device::cuda(0);
  p.dtype = DType::f16;
  p.layout = layout;
  p.layer = "conv2d layer under test";
  return p;
}

TEST(ImplRegistry, ANamedChoiceThatCannotRunTheLayerIsRefused) {
  impl::ConvProblem p = gpu_conv(ops::Layout::nhwc);
  p.dtype = DType::f64;  // neither native entry (NCHW, channels-last) runs float64
  try {
    impl::conv_registry().pick(p, impl::Choice::native, "conv2d layer under test");
    FAIL() << "native took a float64 convolution";
  } catch (const Error& e) {
    test::expect_mentions(e.what(), {"conv2d layer under test", "float64 channels-last", "kernels.conv=native",
                                     "does not support it", "runs NCHW only"});
  }
}

// kernels.conv=native on a channels-last layer is the NCHW kernel between layout changes.
TEST(ImplRegistry, NativeTakesChannelsLastThroughTheNchwKernel) {
  const impl::ConvRegistry& r = impl::conv_registry();
  std::shared_ptr<const impl::ConvImpl> nchw;
  try {
    nchw = r.pick(gpu_conv(ops::Layout::nchw), impl::Choice::native, "conv2d layer under test");
  } catch (const Error& e) {
    GTEST_SKIP() << "this build has no CUDA kernels: " << e.what();
  }
  EXPECT_EQ(r.name_of(nchw.get()), "native");
  const auto nhwc = r.pick(gpu_conv(ops::Layout::nhwc), impl::Choice::native, "conv2d layer under test");
  EXPECT_EQ(r.name_of(nhwc.get()), "native channels-last");
}

TEST(ImplRegistry, NamedChoicesPickTheirImplementation) {
  auto fake = std::make_shared<FakeConv>();
  auto handle = impl::conv_registry().add({"fake gpu", DeviceType::cuda, impl::Choice::native, -5, fake});
  impl::ConvProblem p = gpu_conv(ops::Layout::nchw);
  p.dtype = DType::f64;  // only the fake takes it: the built-in native refuses
  EXPECT_EQ(impl::conv_registry().pick(p, impl::Choice::native, p.layer).get(), fake.get());
  EXPECT_THROW(impl::conv_registry().pick(p, impl::Choice::cudnn, p.layer), Error);
}

TEST(ImplRegistry, CudnnBatchNormRefusesAnEvalBackwardInsteadOfRunningAnother) {
  impl::BatchNormProblem p;
  p.shape = {8, 16, 64};
  p.device = Device::cuda(0);
  p.dtype = DType::f32;
  p.layout = ops::Layout::nchw;
  p.training = false;
  p.needs_backward = true;
  p.layer = "batch_norm layer under test";
  try {
    impl::batch_norm_registry().pick(p, impl::Choice::cudnn, p.layer);
    FAIL() << "kernels.batch_norm=cudnn accepted an eval-mode backward";
  } catch (const Error& e) {
    test::expect_mentions(e.what(), {"batch_norm layer under test", "kernels.batch_norm=cudnn"});
#ifdef CUDAGRAD_WITH_CUDA
    test::expect_mentions(e.what(), {"eval-mode backward"});
#endif
  }
  p.needs_backward = false;  // eval forward only: cuDNN runs it (where the build has cuDNN)
#ifdef CUDAGRAD_WITH_CUDA
  EXPECT_NO_THROW(impl::batch_norm_registry().pick(p, impl::Choice::cudnn, p.layer));
#endif
}

}  // namespace
}  // namespace cg
