// The GPU's fully connected layer behind the registry (kernels/cuda/linear.h), float32, float16
// and bfloat16: one class over a forward and a backward kernel, instantiated for cuBLAS
// (linear_cublas.cpp) and cudagrad's own kernels (linear_native_cuda.cpp), which take over where
// cuBLAS is not in the build (the emulated GPU). Included only by those two files.
#pragma once
#include <vector>

#include "engine/linear/linear.h"
#include "engine/dispatch.h"
#include "kernels/cuda/linear.h"

namespace cg::impl::detail {

template <auto Forward, auto Backward>
class CudaLinear : public LinearImpl {
 public:
  const char* refusal(const LinearProblem& p) const override {
    return ops::detail::gpu_dtype(p.dtype) ? nullptr : "runs float32, float16 and bfloat16 only";
  }
  void forward(const LinearProblem& p, LinearForwardArgs& a) const override {
    using namespace ops::detail;
    std::vector<Tensor> scratch;  // cuBLAS's workspace, from the caching allocator (or a graph's pool)
    Forward(p.m, p.k, p.n, p.dtype, a.x.raw_data(), a.w.raw_data(), raw_or_null(a.b), a.y.raw_data(), stream_of(a.x),
            workspace(a.x.device(), scratch));
  }
  void backward(const LinearProblem& p, LinearBackwardArgs& a) const override {
    using namespace ops::detail;
    std::vector<Tensor> scratch;
    Backward(p.m, p.k, p.n, p.dtype, a.dy.raw_data(), a.x.raw_data(), a.w.raw_data(), raw_or_null_m(a.dx),
             a.dw.raw_data(), raw_or_null_m(a.db), stream_of(a.dy), workspace(a.dy.device(), scratch));
  }
};

}  // namespace cg::impl::detail
