// Which of cuDNN's convolution candidates runs (kernels/cuda/cudnn_algo_pick.h): by default the
// fastest deterministic one that ran, so two trainings of one binary end on the same bits (on the
// H200 a non-deterministic backward-filter algorithm won the stem's timed search, and two runs of
// CudaZero.ModeledBackendShardedEqualsUnsharded differed). No GPU needed: the candidates are
// written here as cuDNN's Find and Get calls return them, fastest first.
#include <gtest/gtest.h>

#if __has_include(<cudnn.h>)
#include "kernels/cuda/cudnn_algo_pick.h"

namespace cg::kernels::cuda {
namespace {

cudnnConvolutionBwdFilterAlgoPerf_t candidate(cudnnConvolutionBwdFilterAlgo_t algo, cudnnStatus_t status,
                                              cudnnDeterminism_t determinism, float ms) {
  cudnnConvolutionBwdFilterAlgoPerf_t p{};
  p.algo = algo;
  p.status = status;
  p.determinism = determinism;
  p.time = ms;
  return p;
}

TEST(CudnnAlgoPick, DeterministicSkipsTheFasterAtomicAlgorithms) {
  const cudnnConvolutionBwdFilterAlgoPerf_t perf[] = {
      candidate(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, CUDNN_STATUS_SUCCESS, CUDNN_NON_DETERMINISTIC, 0.24f),
      candidate(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, CUDNN_STATUS_SUCCESS, CUDNN_NON_DETERMINISTIC, 0.25f),
      candidate(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, CUDNN_STATUS_NOT_SUPPORTED, CUDNN_DETERMINISTIC, -1.f),
      candidate(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, 0.31f),
  };
  EXPECT_EQ(pick_algorithm(perf, 4, true), 3) << "the fastest deterministic candidate that ran";
  EXPECT_EQ(pick_algorithm(perf, 4, false), 0) << "with the others admitted, the fastest of all";
}

TEST(CudnnAlgoPick, NoneAdmittedIsMinusOne) {
  const cudnnConvolutionBwdFilterAlgoPerf_t perf[] = {
      candidate(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, CUDNN_STATUS_SUCCESS, CUDNN_NON_DETERMINISTIC, 0.2f),
      candidate(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_STATUS_NOT_SUPPORTED, CUDNN_DETERMINISTIC, -1.f),
  };
  EXPECT_EQ(pick_algorithm(perf, 2, true), -1);
  EXPECT_EQ(pick_algorithm(perf, 2, false), 0);
  EXPECT_EQ(pick_algorithm(perf, 0, false), -1);
}

TEST(CudnnAlgoPick, TheTimedSearchRetimesTheFirstAdmittedCandidatesInCudnnsOrder) {
  const cudnnConvolutionBwdFilterAlgoPerf_t perf[] = {
      candidate(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, CUDNN_STATUS_SUCCESS, CUDNN_NON_DETERMINISTIC, 0.20f),
      candidate(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, 0.22f),
      candidate(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, CUDNN_STATUS_NOT_SUPPORTED, CUDNN_DETERMINISTIC, -1.f),
      candidate(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, CUDNN_STATUS_SUCCESS, CUDNN_NON_DETERMINISTIC, 0.30f),
      candidate(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, 0.4f),
      candidate(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING, CUDNN_STATUS_SUCCESS, CUDNN_DETERMINISTIC, 0.5f),
  };
  EXPECT_EQ(admitted_algorithms(perf, 6, true, 3), (std::vector<int>{1, 4, 5}));
  EXPECT_EQ(admitted_algorithms(perf, 6, true, 2), (std::vector<int>{1, 4}));
  EXPECT_EQ(admitted_algorithms(perf, 6, false, 3), (std::vector<int>{0, 1, 3}));
  EXPECT_TRUE(admitted_algorithms(perf, 0, false, 3).empty());
}

}  // namespace
}  // namespace cg::kernels::cuda
#else
TEST(CudnnAlgoPick, NeedsCudnnHeaders) {
  GTEST_SKIP() << "needs cudnn.h, which only a build with the CUDA backend sees";
}
#endif
