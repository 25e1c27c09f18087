// Tensor::relocate_to, which ZeRO-1 uses to move parameters into its flat buffer: the values
// arrive in the new place, the tensor (and every copy of its handle, as a module or an optimizer
// holds) reads and writes there from then on, autograd and its hooks go on working, and a place
// of another shape, dtype or device is refused naming both.
#include <gtest/gtest.h>

#include "engine/ops.h"

namespace cg {
namespace {

TEST(Relocate, ValuesMoveAndEveryHandleUsesTheNewPlace) {
  Tensor w = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  w.set_requires_grad(true);
  const Tensor held = w;  // as a module or an optimizer holds it
  Tensor flat = Tensor::zeros({16});
  w.relocate_to(flat.view_at(8, {2, 3}));
  EXPECT_EQ(flat.to_vector<float>(), (std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 0, 0}));
  EXPECT_EQ(held.raw_data(), static_cast<void*>(flat.data<float>() + 8));
  flat.view_at(8, {1}).fill_(7.0);  // a write into the buffer (the all-gather) is the parameter's
  EXPECT_EQ(held.to_vector<float>()[0], 7.f);
  int fired = 0;
  w.register_grad_ready_hook([&](Tensor&) { ++fired; });
  ops::scale(held, 2.0).backward(Tensor::full({2, 3}, 1.0));
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(w.grad().to_vector<float>(), std::vector<float>(6, 2.f));
}

TEST(Relocate, AnotherShapeOrDtypeIsRefusedNamingBoth) {
  Tensor w = Tensor::zeros({2, 3});
  try {
    w.relocate_to(Tensor::zeros({6}));
    FAIL() << "relocated into another shape";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("float32[2, 3] on cpu cannot move into float32[6] on cpu"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(w.relocate_to(Tensor::zeros({2, 3}, DType::f64)), Error);
}

}  // namespace
}  // namespace cg
