// Parameterized GPU tests: the dtype lists they run over and readable case names, so a failure
// names its case (CudaElementwiseOps.MatchTheCpu/bfloat16, CudaCastPairs.ConvertLikeTheCpu/
// float16_to_uint8). GoogleTest allows letters, digits and '_' in a name.
#pragma once
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "util/dtype.h"

namespace cg::test {

// What the GPU's floating kernels take.
inline const std::vector<DType> kGpuFloatTypes = {DType::f32, DType::f16, DType::bf16};

inline std::string dtype_case_name(const ::testing::TestParamInfo<DType>& info) {
  return std::string(dtype_name(info.param));
}

// (from, to): "float32_to_bfloat16".
inline std::string dtype_pair_case_name(const ::testing::TestParamInfo<std::tuple<DType, DType>>& info) {
  return std::string(dtype_name(std::get<0>(info.param))) + "_to_" + std::string(dtype_name(std::get<1>(info.param)));
}

}  // namespace cg::test

namespace cg {
// How GoogleTest prints a DType parameter (in test listings and failures): its name, not its bytes.
inline void PrintTo(DType t, std::ostream* os) { *os << dtype_name(t); }
}  // namespace cg
