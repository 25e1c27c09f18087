// Tensor: a shared handle to an n-dimensional, contiguous, row-major array of one dtype on one
// device, plus its autograd state. Copying a Tensor copies the handle (like torch.Tensor in
// Python); clone() copies the data. Views (reshape, detach) share the storage.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/device.h"
#include "util/dtype.h"
#include "engine/storage.h"
#include "util/check.h"

namespace cg {

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);

class Tensor;
namespace autograd {
class Node;
class AccumulateGrad;
}  // namespace autograd

// Called with the parameter once its gradient is final for the current backward pass.
using GradReadyHook = std::function<void(Tensor& param)>;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  DType dtype = DType::f32;

  // Autograd. A leaf that requires grad owns the node that accumulates into `grad`; a non-leaf
  // result of a differentiable op points at the node that produced it.
  bool requires_grad = false;
  std::shared_ptr<autograd::Node> grad_fn;
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<autograd::AccumulateGrad> grad_accumulator;
  std::vector<GradReadyHook> grad_ready_hooks;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: holds nothing
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- creation
  static Tensor empty(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32, Device device = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32,
                     Device device = Device::cpu());
  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
    CG_CHECK(int64_t(values.size()) == shape_numel(shape), "{} values for shape {}",
             values.size(), shape_str(shape));
    Tensor t = empty(shape, dtype_of<T>);
    std::copy(values.begin(), values.end(), t.data<T>());
    return t;
  }
  static Tensor scalar(double value, DType dtype = DType::f32) { return full({}, value, dtype); }

  // ---- metadata
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  int64_t dim() const { return int64_t(impl().shape.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return shape_numel(impl().shape); }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  size_t nbytes() const { return size_t(numel()) * itemsize(dtype()); }
  std::string str() const;  // "float32[64, 3, 32, 32] on cpu"

  // ---- data access (CPU pointers are host pointers; CUDA ones device pointers)
  void* raw_data() const {
    return static_cast<char*>(impl().storage->data()) + impl().offset * itemsize(dtype());
  }
  template <typename T>
  T* data() const {
    CG_CHECK(dtype() == dtype_of<T>, "tensor is {}, accessed as {}", dtype_name(dtype()),
             dtype_name(dtype_of<T>));
    return static_cast<T*>(raw_data());
  }
  template <typename T>
  std::vector<T> to_vector() const {
    if (!device().is_cpu()) return to(Device::cpu()).to_vector<T>();
    const T* p = data<T>();
    return std::vector<T>(p, p + numel());
  }
  double item() const;  // the one element of a 1-element tensor, as double

  // ---- copies and views (no autograd unless stated)
  Tensor clone() const;                   // new storage, same values, no autograd history
  Tensor detach() const;                  // same storage, no autograd history
  Tensor to(DType dtype) const;           // a converted copy (or *this when already dtype)
  Tensor to(Device device) const;         // a copy on `device` (or *this when already there)
  Tensor view(const Shape& shape) const;  // same storage, new shape (numel must match)
  // Same storage, the elements [offset, offset + numel(shape)) of this contiguous tensor.
  Tensor view_at(int64_t offset, const Shape& shape) const;
  void copy_(const Tensor& src);          // overwrite values (same shape; dtype converted)
  void fill_(double value);
  void zero_() { fill_(0.0); }
  // Moves this tensor's values into `place` (same shape, dtype and device, e.g. a view_at of a
  // larger buffer) and keeps them there: from now on this tensor reads and writes `place`'s
  // memory. Its identity stays (autograd state, hooks, and whoever holds it: a module, an
  // optimizer), so a parameter can join a flat buffer without anyone noticing. No autograd.
  void relocate_to(const Tensor& place);

  // ---- autograd
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& set_requires_grad(bool value);
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  const std::shared_ptr<autograd::Node>& grad_fn() const { return impl().grad_fn; }
  Tensor grad() const { return Tensor(impl().grad); }  // undefined until a backward reaches it
  void set_grad(const Tensor& grad) { impl().grad = grad.impl_; }
  // Runs backward from this tensor (a scalar unless `grad_output` is given); accumulates into the
  // .grad of every leaf that requires grad.
  void backward(const Tensor& grad_output = Tensor()) const;
  // Fires when this leaf's gradient is final within a backward pass (after accumulation).
  void register_grad_ready_hook(GradReadyHook hook);

  TensorImpl& impl() const {
    CG_CHECK(impl_ != nullptr, "use of an undefined tensor");
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

}  // namespace cg
