// Gradient compression for DDP (engine/grad_compression.h): the existing cast kernels (Tensor::copy_)
// and the elementwise family's scale, in place.
#include "engine/grad_compression.h"

#include "engine/impl/elementwise.h"
#include "util/check.h"

namespace cg::ops {
namespace {

void scale_in_place(Tensor& t, float alpha) {
  const impl::ElementwiseProblem problem{t.numel(), t.device(), t.dtype()};
  impl::elementwise_registry()
      .pick(problem, impl::Choice::automatic, [] { return std::string("gradient compression scale"); })
      ->scale(problem, t, double(alpha), t);
}

void check_pair(const char* op, const Tensor& bucket, const Tensor& compressed) {
  CG_CHECK(bucket.dtype() == DType::f32, "{}: the bucket is {}, expected float32", op, bucket.str());
  CG_CHECK(compressed.dtype() == DType::f16 || compressed.dtype() == DType::bf16,
           "{}: the compression buffer is {}, expected float16 or bfloat16", op, compressed.str());
  CG_CHECK(bucket.numel() == compressed.numel() && bucket.device() == compressed.device(),
           "{}: bucket {} and compression buffer {} differ in size or device", op, bucket.str(), compressed.str());
}

}  // namespace

void compress_gradients(Tensor& bucket, Tensor& compressed, int world_size) {
  check_pair("compress_gradients", bucket, compressed);
  CG_CHECK(world_size >= 1, "compress_gradients: world size {}", world_size);
  const float inverse = 1.0f / float(world_size);
  compressed.copy_(bucket);  // round16(g)
  if (world_size == 1) return;
  if (bucket.device().is_cuda()) {
    scale_in_place(compressed, inverse);  // the CUDA kernels compute half types in float32 registers
    return;
  }
  // The CPU kernels take float32 only: widen into the bucket (exact), scale there, round again.
  // The same operations in the same precision as the GPU's one pass, so the same bits.
  bucket.copy_(compressed);
  scale_in_place(bucket, inverse);
  compressed.copy_(bucket);
}

void decompress_gradients(const Tensor& compressed, Tensor& bucket) {
  check_pair("decompress_gradients", bucket, compressed);
  bucket.copy_(compressed);
}

}  // namespace cg::ops
