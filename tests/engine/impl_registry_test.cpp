// The implementation registries (engine/<family>/): a fake convolution put first is picked by
// ops::conv2d and its backward runs the fake too, even after it is removed; named choices and
// refusals name the layer; every registered implementation is listed once. No GPU needed: GPU
// problems are only asked about.
#include <gtest/gtest.h>

#include <atomic>
#include <set>

#include "engine/batch_norm/batch_norm.h"
#include "engine/conv/conv.h"
#include "engine/ops.h"
#include "support/messages.h"

namespace cg {
namespace {

std::atomic<int> fake_forwards{0}, fake_backwards{0};

// Outputs a constant 2 and gradients of constant 7 (dx) and 3 (dw, db): unmistakable.
class FakeConv : public impl::ConvImpl {
 public:
  const char* refusal(const impl::ConvProblem& p) const override {
    return p.dtype == DType::f64 ? nullptr : "only float64";
  }
  void forward(const impl::ConvProblem& p, impl::ConvForwardArgs& a) const override {
    ++fake_forwards;
    a.saved = {a.x.detach(), a.w.detach(), a.w.dtype()};
    const auto& s = p.shape;
    a.y = Tensor::full({s.n, s.c_out, s.out_h(), s.out_w()}, 2.0, a.x.dtype());
  }
  void backward(const impl::ConvProblem& p, impl::ConvBackwardArgs& a) const override {
    ++fake_backwards;
    const impl::ConvSaved& saved = a.saved;
    if (a.need_dx) a.dx = Tensor::full(saved.x.shape(), 7.0, saved.x.dtype());
    if (a.need_w) a.dw = Tensor::full(saved.w.shape(), 3.0, saved.weight_dtype);
    if (a.need_w && a.has_bias) a.db = Tensor::full({p.shape.c_out}, 3.0, saved.x.dtype());
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
    auto handle = impl::conv_registry().put_first({"fake", DeviceType::cpu, impl::ImplKey::im2col, std::make_shared<FakeConv>()});
    y = call.run();
  }  // removed here: the node must still hold the fake
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
  auto handle = impl::conv_registry().put_first({"fake", DeviceType::cpu, impl::ImplKey::im2col, std::make_shared<FakeConv>()});
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
  const char* refusal(const impl::ConvProblem& p) const override {
    return p.layout == ops::Layout::nchw ? FakeConv::refusal(p) : "NCHW only";
  }
};

// The name of the implementation the registry picks for p.
std::string picked(const impl::ConvProblem& p) { return impl::conv_registry().name_of(impl::pick_conv(p).get()); }

TEST(ImplRegistry, ChannelsLastCpuTensorsGetTheChannelsLastConvolutionAroundTheNchwOne) {
  impl::ConvProblem p;
  p.shape = {1, 2, 4, 4, 3, 3, 3, 1, 1};
  p.device = Device::cpu();
  p.dtype = DType::f32;
  p.layer = "conv2d layer under test";
  p.layout = ops::Layout::nhwc;
  EXPECT_EQ(picked(p), "cpu channels-last");
  p.layout = ops::Layout::nchw;  // a 2-channel 3x3 float32 layer: auto's direct convolution
  EXPECT_EQ(picked(p), "cpu direct");
  p.dtype = DType::f64;
  EXPECT_EQ(picked(p), "cpu im2col");
  p.dtype = DType::f32;

  // Inside, it runs the NCHW convolution the registry holds (here a fake), forward and backward.
  fake_forwards = fake_backwards = 0;
  auto handle =
      impl::conv_registry().put_first({"fake nchw", DeviceType::cpu, impl::ImplKey::im2col, std::make_shared<FakeNchwConv>()});
  ConvCall call;
  const Tensor x_nhwc = ops::to_layout(call.x.detach(), ops::Layout::nchw, ops::Layout::nhwc).set_requires_grad(true);
  Tensor y;
  {
    ops::ExecutionScope channels_last({.layout = ops::Layout::nhwc});
    y = ops::conv2d(x_nhwc, call.w, call.b, {.stride = 1, .padding = 1});
  }
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
  p.policy.conv = ops::GpuImpl::native;
  try {
    impl::pick_conv(p);
    FAIL() << "native took a float64 convolution";
  } catch (const Error& e) {
    test::expect_mentions(e.what(), {"conv2d layer under test", "float64 channels-last", "kernels.conv=native"});
#ifdef CUDAGRAD_WITH_CUDA
    test::expect_mentions(e.what(), {"does not support it", "runs NCHW only"});
#else
    test::expect_mentions(e.what(), {"not in this build", "nothing registered for cuda:0"});
#endif
  }
}

// kernels.conv=native on a channels-last layer is the NCHW kernel between layout changes.
TEST(ImplRegistry, NativeTakesChannelsLastThroughTheNchwKernel) {
  impl::ConvProblem nchw = gpu_conv(ops::Layout::nchw), nhwc = gpu_conv(ops::Layout::nhwc);
  nchw.policy.conv = nhwc.policy.conv = ops::GpuImpl::native;
  std::string name;
  try {
    name = picked(nchw);
  } catch (const Error& e) {
    GTEST_SKIP() << "this build has no CUDA kernels: " << e.what();
  }
  EXPECT_EQ(name, "native");
  EXPECT_EQ(picked(nhwc), "native channels-last");
}

TEST(ImplRegistry, NamedChoicesPickTheirImplementation) {
  auto fake = std::make_shared<FakeConv>();
  auto handle = impl::conv_registry().put_first({"fake gpu", DeviceType::cuda, impl::ImplKey::native, fake});
  impl::ConvProblem p = gpu_conv(ops::Layout::nchw);
  p.dtype = DType::f64;  // only the fake takes it: the built-in native refuses
  p.policy.conv = ops::GpuImpl::native;
  EXPECT_EQ(impl::pick_conv(p).get(), fake.get());
  p.policy.conv = ops::GpuImpl::cudnn;
  EXPECT_THROW(impl::pick_conv(p), Error);
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
  p.policy.batch_norm = ops::GpuImpl::cudnn;
  try {
    impl::pick_batch_norm(p);
    FAIL() << "kernels.batch_norm=cudnn accepted an eval-mode backward";
  } catch (const Error& e) {
    test::expect_mentions(e.what(), {"batch_norm layer under test", "kernels.batch_norm=cudnn"});
#ifdef CUDAGRAD_WITH_CUDA
    test::expect_mentions(e.what(), {"eval-mode backward"});
#endif
  }
  p.needs_backward = false;  // eval forward only: cuDNN runs it (where the build has cuDNN)
#ifdef CUDAGRAD_WITH_CUDA
  EXPECT_NO_THROW(impl::pick_batch_norm(p));
#endif
}

// entries() lists each implementation of this build once (what conformance tests enumerate),
// the CPU's five convolutions among them; the tests' fake is not one of them.
TEST(ImplRegistry, EntriesListEveryImplementationOnce) {
  auto handle = impl::conv_registry().put_first({"fake", DeviceType::cpu, impl::ImplKey::im2col, std::make_shared<FakeConv>()});
  std::set<std::string> names;
  for (const impl::ConvEntry& e : impl::conv_registry().entries()) {
    EXPECT_TRUE(names.insert(e.name).second) << e.name << " twice";
    EXPECT_TRUE(e.impl) << e.name;
  }
  for (const char* cpu : {"cpu reference", "cpu im2col", "cpu winograd", "cpu winograd2", "cpu direct",
                          "cpu channels-last"})
    EXPECT_EQ(names.count(cpu), 1u) << cpu;
  // The GPU's only where the build has them.
#ifdef CUDAGRAD_WITH_CUDA
  EXPECT_EQ(names.count("native"), 1u);
#else
  EXPECT_EQ(names.count("native"), 0u);
#endif
#ifdef CUDAGRAD_WITH_CUDA_LIBRARIES
  EXPECT_EQ(names.count("cudnn"), 1u);
#else
  EXPECT_EQ(names.count("cudnn"), 0u);
#endif
  EXPECT_EQ(names.count("fake"), 0u);
  for (const auto& e : impl::batch_norm_registry().entries()) {
    if (e.device == DeviceType::cpu) {
      EXPECT_EQ(e.name, "cpu reference");
    }
  }
}

}  // namespace
}  // namespace cg
