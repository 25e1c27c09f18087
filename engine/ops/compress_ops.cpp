// Gradient compression for DDP (engine/compress_ops.h): the existing cast kernels (Tensor::copy_)
// and the elementwise scale kernels, in place.
#include "engine/compress_ops.h"

#include "engine/dispatch.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cuda/elementwise.h"
#include "util/check.h"

namespace cg::ops {
namespace {

// The float32 bucket *= alpha (check_pair made sure it is float32).
void scale_in_place(Tensor& t, float alpha) {
  detail::on_device(
      "compress_gradients", t, [&] { kernels::cpu::scale<float>(t.numel(), alpha, t.data<float>(), t.data<float>()); },
      [&] { kernels::cuda::scale(t.numel(), t.dtype(), alpha, t.raw_data(), t.raw_data(), detail::stream_of(t)); });
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
  // Divide first, in float32, then round once to 16 bits: PyTorch's stock hook rounds
  // first, which sends every gradient beyond 65504 to infinity in fp16 before the division could
  // bring it back in range. The same two kernels on every device (the float32 scale, a float32
  // multiplication by the float32 1/W; then the cast), so the CPU and the GPU give the same bits.
  if (world_size > 1) scale_in_place(bucket, 1.0f / float(world_size));
  compressed.copy_(bucket);  // round16(g * (1/W)), to nearest even
}

void decompress_gradients(const Tensor& compressed, Tensor& bucket) {
  check_pair("decompress_gradients", bucket, compressed);
  bucket.copy_(compressed);
}

}  // namespace cg::ops
