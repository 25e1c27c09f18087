// dist.backend rules: which transport carries the gradients for each job shape, and the requests
// that cannot work refused with a message naming the setting.
#include <gtest/gtest.h>

#include "dist/backend_choice.h"
#include "support/messages.h"
#include "util/check.h"

namespace cg::dist {
namespace {

JobShape job(bool cuda, int world, int local, int gpus) { return {cuda, world, local, gpus}; }

std::string refusal(BackendRequest r, const JobShape& j) {
  try {
    choose_transport(r, j);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(BackendChoice, AutoPicksNcclOnlyWhenEveryLocalRankHasItsOwnGpu) {
  EXPECT_EQ(choose_transport(BackendRequest::auto_select, job(true, 8, 8, 8)).transport, Transport::nccl);
  EXPECT_EQ(choose_transport(BackendRequest::auto_select, job(true, 16, 8, 8)).transport, Transport::nccl);
  EXPECT_EQ(choose_transport(BackendRequest::auto_select, job(true, 2, 2, 4)).transport, Transport::nccl);
  const TransportChoice shared = choose_transport(BackendRequest::auto_select, job(true, 2, 2, 1));
  EXPECT_EQ(shared.transport, Transport::staged_gloo);
  test::expect_mentions(shared.why, {"2 ranks", "1 GPU", "pinned host memory"});
}

TEST(BackendChoice, CpuTensorsUseGlooAndRefuseNccl) {
  EXPECT_EQ(choose_transport(BackendRequest::auto_select, job(false, 2, 2, 0)).transport, Transport::host_gloo);
  EXPECT_EQ(choose_transport(BackendRequest::gloo, job(false, 2, 2, 0)).transport, Transport::host_gloo);
  test::expect_mentions(refusal(BackendRequest::nccl, job(false, 2, 2, 0)), {"dist.backend=nccl", "CUDA"});
}

TEST(BackendChoice, ExplicitRequestsOnGpus) {
  EXPECT_EQ(choose_transport(BackendRequest::gloo, job(true, 2, 2, 2)).transport, Transport::staged_gloo);
  EXPECT_EQ(choose_transport(BackendRequest::nccl, job(true, 2, 2, 2)).transport, Transport::nccl);
  test::expect_mentions(refusal(BackendRequest::nccl, job(true, 4, 4, 2)),
                        {"dist.backend=nccl", "4 ranks", "2 GPU", "Duplicate GPU", "gloo"});
}

TEST(BackendChoice, OneProcessCommunicatesNothingUnlessModeled) {
  EXPECT_EQ(choose_transport(BackendRequest::auto_select, job(true, 1, 1, 1)).transport, Transport::none);
  EXPECT_EQ(choose_transport(BackendRequest::nccl, job(false, 1, 1, 0)).transport, Transport::none);
  EXPECT_EQ(choose_transport(BackendRequest::modeled, job(true, 1, 1, 1)).transport, Transport::modeled);
  EXPECT_EQ(choose_transport(BackendRequest::modeled, job(false, 1, 1, 0)).transport, Transport::modeled);
  test::expect_mentions(refusal(BackendRequest::modeled, job(true, 2, 2, 2)), {"dist.backend=modeled", "2 processes"});
}

}  // namespace
}  // namespace cg::dist
