#include "kernels/cpu/cast.h"

#include <cstring>

#include "kernels/float_to_int.h"
#include "util/check.h"

namespace cg::kernels::cpu {
namespace {

// Calls f.template operator()<T>() with T the C++ type of `t`.
template <typename F>
void dispatch_all(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f.template operator()<float>();
    case DType::f64: return f.template operator()<double>();
    case DType::f16: return f.template operator()<Half>();
    case DType::bf16: return f.template operator()<BFloat16>();
    case DType::i64: return f.template operator()<int64_t>();
    case DType::i32: return f.template operator()<int32_t>();
    case DType::u8: return f.template operator()<uint8_t>();
  }
  CG_FAIL("unknown dtype");
}

// Conversion through float/double: 16-bit types only convert to and from float. Floating to
// integer saturates (kernels/float_to_int.h), as on the GPU.
template <typename To, typename From>
To convert(From v) {
  if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return convert<To>(float(v));
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(float(v));
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    return float_to_int<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace

void cast(int64_t n, DType src_type, const void* src, DType dst_type, void* dst) {
  if (src_type == dst_type) {
    if (src != dst) std::memcpy(dst, src, size_t(n) * itemsize(src_type));
    return;
  }
  dispatch_all(src_type, [&]<typename From>() {
    dispatch_all(dst_type, [&]<typename To>() {
      const From* s = static_cast<const From*>(src);
      To* d = static_cast<To*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = convert<To>(s[i]);
    });
  });
}

void fill_cast(int64_t n, double value, DType dst_type, void* dst) {
  dispatch_all(dst_type, [&]<typename To>() {
    const To v = convert<To>(value);
    To* d = static_cast<To*>(dst);
    for (int64_t i = 0; i < n; ++i) d[i] = v;
  });
}

}  // namespace cg::kernels::cpu
