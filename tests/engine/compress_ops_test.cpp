// DDP's gradient compression steps (engine/compress_ops.h) against a scalar reference written
// from their definition: compressed = round16(g * (1.0f / W)), divided in float32 before the
// cast (unlike PyTorch's stock hook, which casts first), back = float(that). Values picked to hit
// every rounding case: ties, subnormals, fp16's overflow to infinity, signed zeros, NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "engine/compress_ops.h"
#include "support/random_data.h"
#include "util/half.h"

namespace cg {
namespace {

std::vector<float> awkward_gradients() {
  std::vector<float> v = test::random_vector<float>(4093, 5);
  for (float& x : v) x *= 3.0f;
  const float extra[] = {0.f, -0.f, 1.f, -1.f, 1.0f / 3, 65504.f, 65520.f, 70000.f, -1e6f, 1e-8f, 6e-8f,
                         3e-5f, 2049.f, 2051.f, 1e30f, -3e38f, std::numeric_limits<float>::quiet_NaN(),
                         1.00048828125f /* a tie in fp16 */, 1.00390625f /* a tie in bf16 */};
  v.insert(v.end(), std::begin(extra), std::end(extra));
  return v;
}

template <typename T>
float value_of(uint16_t bits) {
  T t;
  t.bits = bits;
  return float(t);
}

template <typename T>
uint16_t reference_bits(float g, int world) {
  return T(g * (1.0f / float(world))).bits;
}

void expect_compresses_like_the_reference(DType dtype, int world) {
  const std::vector<float> g = awkward_gradients();
  Tensor bucket = Tensor::from_vector(g, {int64_t(g.size())});
  Tensor compressed = Tensor::empty({int64_t(g.size())}, dtype);
  ops::compress_gradients(bucket, compressed, world);
  const uint16_t* bits = static_cast<const uint16_t*>(compressed.raw_data());
  int differ_from_plain_cast = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const uint16_t want =
        dtype == DType::f16 ? reference_bits<Half>(g[i], world) : reference_bits<BFloat16>(g[i], world);
    ASSERT_EQ(bits[i], want) << dtype_name(dtype) << " W=" << world << " element " << i << " = " << g[i];
    const uint16_t plain = dtype == DType::f16 ? Half(g[i]).bits : BFloat16(g[i]).bits;
    differ_from_plain_cast += plain != want;
  }
  if (world > 1) {
    EXPECT_GT(differ_from_plain_cast, 100) << "the division by the world size did not happen";
  }
  ops::decompress_gradients(compressed, bucket);
  const std::vector<float> back = bucket.to_vector<float>();
  for (size_t i = 0; i < g.size(); ++i) {
    const float want = dtype == DType::f16 ? value_of<Half>(bits[i]) : value_of<BFloat16>(bits[i]);
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(back[i])) << i;
    else EXPECT_EQ(std::memcmp(&back[i], &want, 4), 0) << "element " << i << ": " << back[i] << " vs " << want;
  }
}

TEST(GradCompression, Fp16MatchesTheReferenceBitForBit) {
  for (int world : {1, 2, 3, 8}) expect_compresses_like_the_reference(DType::f16, world);
}

TEST(GradCompression, Bf16MatchesTheReferenceBitForBit) {
  for (int world : {1, 2, 3, 8}) expect_compresses_like_the_reference(DType::bf16, world);
}

// Dividing first: on 2 ranks a gradient up to twice fp16's 65504 still fits (PyTorch's stock
// hook, rounding 98256 to fp16 before halving it, gives infinity); only an average past 65504
// overflows.
TEST(GradCompression, Fp16DividesBeforeCastingSoAverageInRangeDoesNotOverflow) {
  Tensor bucket = Tensor::from_vector(std::vector<float>{65504.f * 1.5f, 100000.f, -131000.f, 140000.f}, {4});
  Tensor compressed = Tensor::empty({4}, DType::f16);
  ops::compress_gradients(bucket, compressed, 2);
  ops::decompress_gradients(compressed, bucket);
  const std::vector<float> back = bucket.to_vector<float>();
  EXPECT_EQ(back[0], 49120.f);  // 49128 rounded to fp16's step of 32 there
  EXPECT_EQ(back[1], 49984.f);  // 50000, a tie, to the even neighbour
  EXPECT_EQ(back[2], -65504.f);
  EXPECT_TRUE(std::isinf(back[3])) << back[3];  // 70000: the average itself is out of range
}

TEST(GradCompression, RefusesMismatchedBuffers) {
  Tensor bucket = Tensor::zeros({4});
  Tensor wrong_size = Tensor::empty({3}, DType::f16), wrong_type = Tensor::empty({4}, DType::f32);
  EXPECT_THROW(ops::compress_gradients(bucket, wrong_size, 2), Error);
  EXPECT_THROW(ops::compress_gradients(bucket, wrong_type, 2), Error);
}

}  // namespace
}  // namespace cg
