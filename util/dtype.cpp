#include "util/dtype.h"

#include "util/check.h"

namespace cg {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "float32";
    case DType::f64: return "float64";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::i64: return "int64";
    case DType::i32: return "int32";
    case DType::u8: return "uint8";
  }
  return "?";
}

std::string_view dtype_safetensors_name(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::i64: return "I64";
    case DType::i32: return "I32";
    case DType::u8: return "U8";
  }
  return "?";
}

DType dtype_from_safetensors_name(std::string_view name) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32, DType::u8})
    if (dtype_safetensors_name(t) == name) return t;
  throw Error(fmt::format("unsupported tensor dtype '{}'", name));
}

}  // namespace cg
