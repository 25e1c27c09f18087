// A configuration that names a GPU implementation this build lacks is refused saying why: in the
// emulated GPU's build, cuDNN and cuBLAS are not emulated, and the refusal says to choose the
// native kernels; in the CUDA build the same names pick cuDNN. Picking needs no GPU.
#include <gtest/gtest.h>

#include "engine/batch_norm/batch_norm.h"
#include "engine/conv/conv.h"
#include "kernels/backend.h"
#include "support/messages.h"

namespace cg {
namespace {

impl::ConvProblem cudnn_conv() {
  impl::ConvProblem p;
  p.shape = {8, 16, 14, 14, 16, 3, 3, 1, 1};
  p.device = Device::cuda(0);
  p.dtype = DType::f16;
  p.layer = "conv2d layer under test";
  p.policy.conv = ops::GpuImpl::cudnn;
  return p;
}

TEST(NamedImplementation, CudnnIsRefusedInTheEmulatedBuildNamingTheNativeChoice) {
  const impl::ConvProblem p = cudnn_conv();
  if constexpr (kernels::kCudaLibraries) {
    EXPECT_EQ(impl::conv_registry().name_of(impl::pick_conv(p).get()), "cudnn");
    return;
  }
  try {
    impl::pick_conv(p);
    FAIL() << "kernels.conv=cudnn was picked in a build without cuDNN";
  } catch (const Error& e) {
    test::expect_mentions(e.what(), {"conv2d layer under test", "kernels.conv=cudnn", "not in this build"});
    if constexpr (kernels::kGpuEmulation) test::expect_mentions(e.what(), {"not cuDNN or cuBLAS", "choose native"});
  }
}

}  // namespace
}  // namespace cg
