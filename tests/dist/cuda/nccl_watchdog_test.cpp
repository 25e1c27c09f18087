// The NCCL watchdog on a real collective that cannot complete in time: a single-rank NCCL
// all-reduce queued behind a kernel that runs far longer than dist.timeout_s. The watchdog must
// fail the collective with an error naming the rank and the operation, abort the communicator,
// and make the next call on the training thread throw. (One GPU is enough: the communicator is
// real, only the delay is staged.) Skips without a GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "dist/gradient_comm.h"
#include "engine/runtime.h"
#include "support/need_gpu.h"
#include "support/one_rank_store.h"
#include "support/random_data.h"

namespace cg::dist {
namespace {

const Device kGpu = Device::cuda(0);

std::string error_of(Work& work) {
  try {
    work.wait();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(NcclWatchdog, FiresOnACollectiveThatCannotCompleteAndNamesRankAndOperation) {
  NEED_GPU();
  NEED_CUDA_LIBRARY("NCCL");
  TcpStore store = test::one_rank_store();
  constexpr double kTimeoutS = 1.0, kStuckS = 4.0;
  auto comm = make_nccl_comm(store, 0, 1, kGpu, kTimeoutS);
  const Stream compute = Stream::create(kGpu);
  Tensor t = Tensor::from_vector(test::random_vector<float>(1000, 5), {1000}).to(kGpu);

  // The all-reduce starts after the work enqueued on compute: a kernel busy for kStuckS.
  runtime::spin(compute, kStuckS * 1e6);
  const auto issued = std::chrono::steady_clock::now();
  auto work = comm->all_reduce_average(t, compute, "bucket 0");
  const std::string error = error_of(*work);  // the watchdog finishes it, with its error
  const double after_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - issued).count();

  EXPECT_NE(error.find("rank 0"), std::string::npos) << error;
  EXPECT_NE(error.find("all_reduce #1"), std::string::npos) << error;
  EXPECT_NE(error.find("bucket 0"), std::string::npos) << error;
  EXPECT_NE(error.find("timed out after 1 s (dist.timeout_s)"), std::string::npos) << error;
  EXPECT_NE(error.find("aborted"), std::string::npos) << error;
  // Not before the timeout. (Aborting frees the communicator's memory, which waits for the device,
  // so the error may only arrive when the spin ends; the message says which limit fired.)
  EXPECT_GE(after_s, kTimeoutS * 0.9);
  EXPECT_LT(after_s, kStuckS + 30.0);
  // The training thread's next call throws the same failure.
  try {
    comm->all_reduce_average(t, compute, "bucket 1");
    ADD_FAILURE() << "a collective was issued on an aborted communicator";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0"), std::string::npos) << e.what();
  }
  comm.reset();
  compute.synchronize();  // the spin ends; nothing else was left waiting on the device
}

}  // namespace
}  // namespace cg::dist
