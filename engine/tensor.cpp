#include "engine/tensor.h"

#include "engine/device_copy.h"
#include "engine/dispatch.h"
#include "engine/stream.h"
#include "kernels/cpu/cast.h"
#include "kernels/backend.h"
#include "kernels/cuda/elementwise.h"

namespace cg {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape) CG_CHECK(d >= 0, "negative dimension in shape {}", shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(size_t(shape_numel(shape)) * itemsize(dtype), device);
  impl->shape = shape;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  zero_bytes(t.raw_data(), device, t.nbytes());
  return t;
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_(value);
  return t;
}

int64_t Tensor::size(int64_t d) const {
  const int64_t n = dim();
  if (d < 0) d += n;
  CG_CHECK(d >= 0 && d < n, "dimension {} out of range for {}", d, str());
  return shape()[size_t(d)];
}

std::string Tensor::str() const {
  if (!defined()) return "undefined tensor";
  return fmt::format("{}{} on {}", dtype_name(dtype()), shape_str(shape()), device().str());
}

double Tensor::item() const {
  CG_CHECK(numel() == 1, "item() needs one element, tensor is {}", str());
  if (!device().is_cpu()) return to(Device::cpu()).item();
  double v = 0;
  kernels::cpu::cast(1, dtype(), raw_data(), DType::f64, &v);
  return v;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape(), dtype(), device());
  copy_bytes(t.raw_data(), device(), raw_data(), device(), nbytes());
  return t;
}

Tensor Tensor::to(Device target) const {
  if (target == device()) return *this;
  Tensor t = empty(shape(), dtype(), target);
  copy_bytes(t.raw_data(), target, raw_data(), device(), nbytes());
  return t;
}

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = impl_->storage;
  impl->offset = impl_->offset;
  impl->shape = impl_->shape;
  impl->dtype = impl_->dtype;
  return Tensor(std::move(impl));
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return *this;
  Tensor t = empty(shape(), target, device());
  t.copy_(*this);
  return t;
}

Tensor Tensor::view(const Shape& new_shape) const {
  CG_CHECK(shape_numel(new_shape) == numel(), "cannot view {} as {}", str(), shape_str(new_shape));
  Tensor t = detach();
  t.impl().shape = new_shape;
  return t;
}

Tensor Tensor::view_at(int64_t offset, const Shape& shape) const {
  CG_CHECK(offset >= 0 && offset + shape_numel(shape) <= numel(), "view of {} elements at {} exceeds {}",
           shape_numel(shape), offset, str());
  Tensor t = detach();
  t.impl().offset += offset;
  t.impl().shape = shape;
  return t;
}

void Tensor::relocate_to(const Tensor& place) {
  CG_CHECK(place.shape() == shape() && place.dtype() == dtype() && place.device() == device(),
           "relocate_to: {} cannot move into {}", str(), place.str());
  copy_bytes(place.raw_data(), device(), raw_data(), device(), nbytes());
  impl().storage = place.impl().storage;
  impl().offset = place.impl().offset;
}

void Tensor::copy_(const Tensor& src) {
  CG_CHECK(src.shape() == shape(), "copy_ from {} into {}", src.str(), str());
  if (src.dtype() == dtype()) return copy_bytes(raw_data(), device(), src.raw_data(), src.device(), nbytes());
  // A dtype change runs where the destination is: bring src there first.
  const Tensor here = src.to(device());
  ops::detail::on_device(
      "copy_", device(), [&] { kernels::cpu::cast(numel(), here.dtype(), here.raw_data(), dtype(), raw_data()); },
      [&] {
        kernels::cuda::cast(numel(), here.dtype(), here.raw_data(), dtype(), raw_data(),
                            current_stream(device()).handle());
      });
}

void Tensor::fill_(double value) {
  if (value == 0.0 && device().is_cuda()) return zero_bytes(raw_data(), device(), nbytes());
  ops::detail::on_device(
      "fill_", device(), [&] { kernels::cpu::fill_cast(numel(), value, dtype(), raw_data()); },
      [&] { kernels::cuda::fill(numel(), dtype(), value, raw_data(), current_stream(device()).handle()); });
}

Tensor& Tensor::set_requires_grad(bool value) {
  CG_CHECK(is_leaf(), "requires_grad can only be set on a leaf tensor");
  CG_CHECK(!value || is_floating(dtype()), "only floating-point tensors can require grad ({})", str());
  impl().requires_grad = value;
  return *this;
}

void Tensor::register_grad_ready_hook(GradReadyHook hook) {
  CG_CHECK(is_leaf() && requires_grad(), "grad-ready hooks attach to leaves that require grad");
  impl().grad_ready_hooks.push_back(std::move(hook));
}

}  // namespace cg
