// kernels.conv=auto on a GPU under kernels.cudnn_algo_search=timed (engine/conv/conv_choice.cpp):
// cuDNN and the native kernels are timed on the layer and the faster goes first. "cuDNN" here is
// a fake registered ahead of the real one (the emulated GPU has none): a slow one that runs the
// native kernels 32 times over (8 once lost to the channels-last native kernel's two layout
// changes, on the emulated GPU with the other core busy), or a fast one that launches nothing. The choice is kept for the
// process, per shape, so each case has a batch size of its own; a second thread reads the first
// one's choice without timing again. Skips without a GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "engine/conv/conv.h"
#include "support/need_gpu.h"

namespace cg {
namespace {

// A 1x1 stride-2 shortcut of `batch` images, small for the emulated GPU.
impl::ConvProblem downsample(int64_t batch, ops::Layout layout,
                             ops::ConvAlgoSearch search = ops::ConvAlgoSearch::timed) {
  impl::ConvProblem p;
  p.shape = {batch, 8, 8, 8, 16, 1, 1, 2, 0};
  p.device = Device::cuda(0);
  p.dtype = DType::f32;
  p.layout = layout;
  p.layer = "conv2d layer under test";
  p.policy.conv = ops::GpuImpl::automatic;
  p.policy.cudnn_algo_search = search;
  return p;
}

// Counts its passes; `repeat` times the native kernels' work per pass, or none at all when 0.
class FakeCudnn : public impl::ConvImpl {
 public:
  FakeCudnn(std::shared_ptr<const impl::ConvImpl> native, int repeat) : native_(std::move(native)), repeat_(repeat) {}
  mutable std::atomic<int> forwards{0};

  const char* refusal(const impl::ConvProblem&) const override { return nullptr; }
  void forward(const impl::ConvProblem& p, impl::ConvForwardArgs& a) const override {
    ++forwards;
    const impl::ConvProblem q = nchw(p);
    a.y = Tensor::empty({p.shape.n, p.shape.c_out, p.shape.out_h(), p.shape.out_w()}, p.dtype, p.device);
    const Tensor x_nchw = Tensor::empty({p.shape.n, p.shape.c_in, p.shape.h, p.shape.w}, p.dtype, p.device);
    for (int i = 0; i < repeat_; ++i) {
      impl::ConvForwardArgs inner{.x = x_nchw, .w = a.w, .b = a.b};
      native_->forward(q, inner);
      a.y = inner.y;
      a.saved = inner.saved;
    }
    a.saved.x = a.x;
  }
  void backward(const impl::ConvProblem& p, impl::ConvBackwardArgs& a) const override {
    const Tensor dy_nchw = Tensor::empty({p.shape.n, p.shape.c_out, p.shape.out_h(), p.shape.out_w()}, p.dtype, p.device);
    for (int i = 0; i < repeat_; ++i) {
      impl::ConvBackwardArgs inner{.dy = dy_nchw, .saved = a.saved, .need_dx = a.need_dx, .need_w = a.need_w,
                                   .has_bias = a.has_bias};
      native_->backward(nchw(p), inner);
      a.dx = inner.dx;
      a.dw = inner.dw;
      a.db = inner.db;
    }
  }

 private:
  static impl::ConvProblem nchw(impl::ConvProblem p) {
    p.layout = ops::Layout::nchw;
    return p;
  }
  std::shared_ptr<const impl::ConvImpl> native_;
  int repeat_;
};

std::shared_ptr<FakeCudnn> fake_cudnn(int repeat) {
  const auto native = impl::conv_registry().first_supporting(downsample(1, ops::Layout::nchw), impl::ImplKey::native);
  return std::make_shared<FakeCudnn>(native, repeat);
}

// What a new thread picks for `p`, asked twice, the pick then run forward.
std::string picked_in_new_thread(const impl::ConvProblem& p) {
  std::string first, second;
  std::thread([&] {
    first = impl::conv_registry().name_of(impl::pick_conv(p).get());
    const auto picked = impl::pick_conv(p);
    second = impl::conv_registry().name_of(picked.get());
    const kernels::Conv2dShape& s = p.shape;
    const bool nhwc = p.layout == ops::Layout::nhwc;
    impl::ConvForwardArgs a{
        .x = Tensor::zeros(nhwc ? Shape{s.n, s.h, s.w, s.c_in} : Shape{s.n, s.c_in, s.h, s.w}, p.dtype, p.device),
        .w = Tensor::zeros({s.c_out, s.c_in, s.kh, s.kw}, DType::f32, p.device)};
    picked->forward(p, a);
  }).join();
  EXPECT_EQ(first, second) << "the choice changed between two calls of one thread";
  return first;
}

TEST(ConvTimedChoice, TheNativeKernelsMustWinByTheMargin) {
  EXPECT_TRUE(impl::native_measured_faster(1.0, 0.5));
  EXPECT_TRUE(impl::native_measured_faster(1.0, 0.79));
  EXPECT_FALSE(impl::native_measured_faster(1.0, 0.81));  // faster, but within the timing noise's reach
  EXPECT_FALSE(impl::native_measured_faster(1.0, 1.0));
  EXPECT_FALSE(impl::native_measured_faster(0.5, 1.0));
}

TEST(ConvTimedChoice, ASlowCudnnIsPassedOverAfterOneTimingPerShape) {
  NEED_GPU();
  const auto fake = fake_cudnn(32);
  auto handle = impl::conv_registry().put_first({"slow cudnn", DeviceType::cuda, impl::ImplKey::cudnn, fake});
  EXPECT_EQ(picked_in_new_thread(downsample(2, ops::Layout::nchw)), "native");
  // One warm-up and five timed passes, once per process: the second pick, and another thread's,
  // read the choice.
  EXPECT_EQ(fake->forwards.load(), 6);
  EXPECT_EQ(picked_in_new_thread(downsample(2, ops::Layout::nchw)), "native");
  EXPECT_EQ(fake->forwards.load(), 6);
  // Channels-last: the native kernel between layout changes, whose inner NCHW pick (made in its
  // forward) is the native kernel's, not timed again.
  EXPECT_EQ(picked_in_new_thread(downsample(2, ops::Layout::nhwc)), "native channels-last");
  EXPECT_EQ(fake->forwards.load(), 12);
}

TEST(ConvTimedChoice, AFastCudnnStaysFirst) {
  NEED_GPU();
  auto handle = impl::conv_registry().put_first({"fast cudnn", DeviceType::cuda, impl::ImplKey::cudnn, fake_cudnn(0)});
  EXPECT_EQ(picked_in_new_thread(downsample(3, ops::Layout::nchw)), "fast cudnn");
  EXPECT_EQ(picked_in_new_thread(downsample(3, ops::Layout::nhwc)), "fast cudnn");
}

TEST(ConvTimedChoice, UnderTheHeuristicSearchNothingIsTimedAndCudnnComesFirst) {
  NEED_GPU();
  const auto fake = fake_cudnn(32);
  auto handle = impl::conv_registry().put_first({"slow cudnn", DeviceType::cuda, impl::ImplKey::cudnn, fake});
  EXPECT_EQ(picked_in_new_thread(downsample(4, ops::Layout::nchw, ops::ConvAlgoSearch::heuristic)), "slow cudnn");
  EXPECT_EQ(fake->forwards.load(), 1);  // the one forward picked_in_new_thread runs, no timing
}

}  // namespace
}  // namespace cg
