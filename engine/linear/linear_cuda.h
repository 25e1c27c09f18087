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
  void forward(const LinearProblem& p, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) const override {
    std::vector<Tensor> scratch;  // cuBLAS's workspace, from the caching allocator (or a graph's pool)
    Forward(p.m, p.k, p.n, p.dtype, x.raw_data(), w.raw_data(), ops::detail::raw_or_null(b), y.raw_data(), ops::detail::stream_of(x),
            ops::detail::workspace(x.device(), scratch));
  }
  void backward(const LinearProblem& p, const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw,
                Tensor& db) const override {
    std::vector<Tensor> scratch;
    Backward(p.m, p.k, p.n, p.dtype, dy.raw_data(), x.raw_data(), w.raw_data(), ops::detail::raw_or_null_m(dx), dw.raw_data(),
             ops::detail::raw_or_null_m(db), ops::detail::stream_of(dy), ops::detail::workspace(dy.device(), scratch));
  }
};

}  // namespace cg::impl::detail
