// kernels.cpu_conv=auto's backward phases (engine/conv/conv.h): the layer's forward ran the
// algorithm cpu_conv_auto named for it (direct or Winograd F(2x2)), and each backward phase runs
// the kernel kernels/cpu_conv/auto_rule.h's exact_phases_auto names: the fastest of those as exact
// as PyTorch float32 for that phase, which need not be the forward's.
#include "engine/conv/conv.h"
#include "engine/conv/conv_cpu_tensors.h"
#include "kernels/cpu_conv/auto_rule.h"
#include "kernels/cpu_conv/conv_direct.h"
#include "kernels/cpu_conv/im2col.h"
#include "kernels/cpu_conv/winograd.h"

namespace cg::impl {
namespace {

using kernels::cpu::ExactConv;

void backward_data(ExactConv by, const kernels::Conv2dShape& s, const float* dy, const float* w, float* dx) {
  switch (by) {
    case ExactConv::direct: return kernels::cpu::direct_conv2d_backward_data(s, dy, w, dx);
    case ExactConv::winograd2: return kernels::cpu::winograd2_conv2d_backward_data(s, dy, w, dx);
    case ExactConv::im2col: return kernels::cpu::im2col_conv2d_backward_data<float>(s, dy, w, dx);
  }
}

void backward_filter(ExactConv by, const kernels::Conv2dShape& s, const float* x, const float* dy, float* dw,
                     float* db) {
  switch (by) {
    case ExactConv::direct: return kernels::cpu::direct_conv2d_backward_filter(s, x, dy, dw, db);
    case ExactConv::winograd2: return kernels::cpu::winograd2_conv2d_backward_filter(s, x, dy, dw, db);
    case ExactConv::im2col: return kernels::cpu::im2col_conv2d_backward_filter<float>(s, x, dy, dw, db);
  }
}

}  // namespace

void cpu_auto_backward(const ConvProblem& p, ConvBackwardArgs& a) {
  const Tensor &x = a.saved.x, &w = a.saved.w, &dy = a.dy;
  const kernels::cpu::ExactPhases by = kernels::cpu::exact_phases_auto(p.shape);
  new_conv_grads(p, a);
  if (a.need_dx) backward_data(by.data, p.shape, dy.data<float>(), w.data<float>(), a.dx.data<float>());
  if (a.need_w)
    backward_filter(by.filter, p.shape, x.data<float>(), dy.data<float>(), a.dw.data<float>(),
                    data_or_null<float>(a.db));
}

}  // namespace cg::impl
