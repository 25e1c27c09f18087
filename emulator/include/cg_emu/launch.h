// A kernel launch on the emulated device, what a device spells kernel<<<grid, block, shared_bytes, stream>>>(args...):
//   ::cg_emu::launch(kernel, "kernel", grid, block, shared_bytes, stream)(args...)
// (the kernels reach it through launch_kernel, kernels/cuda/launch.h and cg_emu/kernel_start.h).
// Like a real launch it converts the arguments to the kernel's parameter types, copies them, and
// queues the grid on the stream (emulator/streams.h); it runs when the stream is driven.
#pragma once
#include <cuda_runtime.h>

#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

namespace cg_emu {

// Queues fn(closure) for every thread of the grid; the closure lives as long as the queued work
// (and any graph that captured it). A configuration the device refuses sets the launch error.
// `entry` is the kernel function itself, which names it in cg_emu/traffic.h's records.
void enqueue_kernel(cudaStream_t stream, dim3 grid, dim3 block, size_t shared_bytes,
                    std::shared_ptr<const void> closure, void (*fn)(const void*), const char* name,
                    const void* entry);

template <typename... Params>
class Launch {
 public:
  Launch(void (*kernel)(Params...), const char* name, dim3 grid, dim3 block, size_t shared_bytes,
         cudaStream_t stream)
      : kernel_(kernel), name_(name), grid_(grid), block_(block), shared_bytes_(shared_bytes), stream_(stream) {}

  template <typename... Args>
  void operator()(Args&&... args) const {
    static_assert(sizeof...(Args) == sizeof...(Params), "a kernel launch with the wrong number of arguments");
    struct Closure {
      void (*kernel)(Params...);
      std::tuple<std::decay_t<Params>...> args;
    };
    auto closure = std::make_shared<const Closure>(
        Closure{kernel_, std::tuple<std::decay_t<Params>...>(std::forward<Args>(args)...)});
    enqueue_kernel(
        stream_, grid_, block_, shared_bytes_, closure,
        [](const void* p) {
          const auto* c = static_cast<const Closure*>(p);
          std::apply(c->kernel, c->args);  // each thread gets its own copy of the parameters
        },
        name_, reinterpret_cast<const void*>(kernel_));
  }

 private:
  void (*kernel_)(Params...);
  const char* name_;
  dim3 grid_, block_;
  size_t shared_bytes_;
  cudaStream_t stream_;
};

template <typename... Params>
Launch<Params...> launch(void (*kernel)(Params...), const char* name, dim3 grid, dim3 block,
                         size_t shared_bytes = 0, cudaStream_t stream = nullptr) {
  return Launch<Params...>(kernel, name, grid, block, shared_bytes, stream);
}

}  // namespace cg_emu
