// Element types a Tensor can hold, their sizes and names. Lives in util/ because every layer
// (kernels included) speaks of dtypes. f16/bf16 are storage types on the CPU; f64 serves gradient checks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "util/half.h"

namespace cg {

enum class DType : uint8_t { f32, f64, f16, bf16, i64, i32, u8 };

constexpr size_t itemsize(DType t) {
  switch (t) {
    case DType::f64: case DType::i64: return 8;
    case DType::f32: case DType::i32: return 4;
    case DType::f16: case DType::bf16: return 2;
    case DType::u8: return 1;
  }
  return 0;
}

constexpr bool is_floating(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}

// PyTorch-style names ("float32"), used in error messages.
std::string_view dtype_name(DType t);
// The safetensors spelling ("F32", "BF16", "I64"), used by checkpoints; and back.
std::string_view dtype_safetensors_name(DType t);
DType dtype_from_safetensors_name(std::string_view name);

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::f32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::f64; };
template <> struct DTypeOf<Half> { static constexpr DType value = DType::f16; };
template <> struct DTypeOf<BFloat16> { static constexpr DType value = DType::bf16; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::i64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::i32; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::u8; };
template <typename T> constexpr DType dtype_of = DTypeOf<T>::value;

}  // namespace cg
