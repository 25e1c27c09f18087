// What dist.sharding=full_shard builds on in the engine: a storage's memory released and taken
// again while its views (a parameter, a backward node's saved weight) live on, a read in between
// refused naming the cause, and ops::backward_hook running its callback when the gradient arrives,
// before the ops that made the tensor see it, the gradient passing unchanged.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/ops.h"
#include "engine/storage.h"
#include "util/check.h"

namespace cg {
namespace {

TEST(StorageRelease, ViewsSurviveAReleaseAndReadTheMemoryTakenAgain) {
  Tensor flat = Tensor::zeros({8});
  const Tensor w = flat.view_at(2, {2, 2});  // as a parameter inside a unit's buffer
  Storage& storage = *flat.impl().storage;
  storage.release();
  EXPECT_TRUE(storage.released());
  try {
    (void)w.to_vector<float>();
    FAIL() << "a released storage was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("full_shard"), std::string::npos) << e.what();
  }
  storage.reacquire();
  EXPECT_FALSE(storage.released());
  flat.fill_(3.0);  // the all-gather writing the buffer again
  EXPECT_EQ(w.to_vector<float>(), std::vector<float>(4, 3.f));
}

TEST(BackwardHook, RunsBeforeTheOpsThatMadeTheTensorAndPassesTheGradient) {
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2}, {2});
  x.set_requires_grad(true);
  std::vector<std::string> order;
  x.register_grad_ready_hook([&](Tensor&) { order.push_back("x ready"); });
  const Tensor y = ops::scale(x, 3.0);
  const Tensor hooked = ops::backward_hook(y, [&] { order.push_back("hook"); });
  EXPECT_EQ(hooked.raw_data(), y.raw_data()) << "the forward is the same memory";
  ops::scale(hooked, 2.0).backward(Tensor::full({2}, 1.0));
  EXPECT_EQ(order, (std::vector<std::string>{"hook", "x ready"}));
  EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>(2, 6.f));
  // Without autograd: the tensor itself, no hook.
  const Tensor plain = Tensor::zeros({2});
  EXPECT_TRUE(ops::backward_hook(plain, [&] { order.push_back("never"); }).same(plain));
}

}  // namespace
}  // namespace cg
