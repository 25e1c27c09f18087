// Floating point to integer, the one rule for the CPU and the GPU: truncate toward zero, saturate
// at the integer type's limits, NaN to 0. C++ leaves an out-of-range conversion undefined, and the
// two devices did differ on it: x86 wraps (-3.f to uint8 gave 253), the GPU's convert instruction
// saturates (0); seen on the H100 by CudaCastPairs.ConvertsLikeTheCpu. Saturating is the rule that
// needs no undefined step on either side.
#pragma once
#include <cstdint>
#include <type_traits>

#include "util/host_device.h"

namespace cg::kernels {

template <typename To, typename From>
CG_HOST_DEVICE inline To float_to_int(From v) {
  static_assert(std::is_floating_point_v<From> && std::is_integral_v<To>);
  constexpr bool kSigned = std::is_signed_v<To>;
  constexpr int kDigits = int(sizeof(To)) * 8 - (kSigned ? 1 : 0);  // value bits: 63, 31, 8
  static_assert(kDigits < 64);
  // 2^kDigits is exact in float and double; the type's range is [-2^kDigits or 0, 2^kDigits - 1].
  constexpr uint64_t kLimit = uint64_t(1) << kDigits;
  if (!(v == v)) return To(0);
  if (v >= From(kLimit)) return To(kLimit - 1);
  if (kSigned ? v <= -From(kLimit) : v <= From(0)) return kSigned ? To(-int64_t(kLimit - 1) - 1) : To(0);
  return To(v);  // in range once truncated toward zero
}

}  // namespace cg::kernels
