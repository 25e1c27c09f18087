#include "util/half.h"

namespace cg {

// binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. Handles subnormals, overflow to
// infinity and NaN; rounds to nearest even.
Half::Half(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) { bits = uint16_t(sign | 0x7e00u); return; }    // NaN
  if (u >= 0x477ff000u) { bits = uint16_t(sign | 0x7c00u); return; }   // rounds past 65504: inf
  if (u < 0x38800000u) {                                               // subnormal or zero in f16
    if (u < 0x33000000u) { bits = uint16_t(sign); return; }            // below half the smallest
    const uint32_t mant = (u & 0x7fffffu) | 0x800000u;
    const int shift = 126 - int(u >> 23);                              // 14..24
    uint32_t h = mant >> (shift);
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    bits = uint16_t(sign | h);
    return;
  }
  uint32_t h = ((u >> 13) - (112u << 10));  // rebias exponent 127 -> 15
  const uint32_t rem = u & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  bits = uint16_t(sign | h);
}

Half::operator float() const {
  const uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu, mant = bits & 0x3ffu, u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do { mant <<= 1; ++e; } while (!(mant & 0x400u));
      u = sign | (uint32_t(112 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    u = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace cg
