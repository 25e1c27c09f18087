// Which implementation runs an op, for the op families whose implementations compete
// (convolution, batch norm, the fully connected layer), in the spirit of Caffe's layer registry.
// Each implementation is an object behind the family's interface (engine/<family>/<family>.h),
// registered when the family's registry is first built (the implementations of this build only),
// with the device it runs on and the kernels.* value that selects it. Every interface has the same
// shape: `forward(const Problem&, <Family>ForwardArgs&)` and `backward(const Problem&,
// <Family>BackwardArgs&)`, the args holding the call's tensors, inputs first, then the outputs the
// implementation writes (allocated by the op where every implementation lays them out alike:
// batch norm's and the linear layer's; by the implementation where each keeps its own: the
// convolution's, whose saved weight may be a cast or transposed copy).
// The family's rule (conv_selection, batch_norm_selection, ...) turns the problem at hand and its
// KernelPolicy into a Selection: the selecting values, most preferred first. pick() then takes
// the first registered implementation of those that supports the problem, or refuses the layer:
//   - a named choice (kernels.conv=native) refuses with that implementation's own reason;
//   - otherwise with every candidate's reason after its name.
// The entries never change after the registry is built, so pick() takes no lock. Tests may put
// one fake ahead of them for a while (put_first), read with one atomic load.
#pragma once
#include <array>
#include <atomic>
#include <concepts>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/ranges.h>

#include "engine/device.h"
#include "kernels/backend.h"
#include "util/check.h"
#include "util/dtype.h"
#include "util/layout.h"

namespace cg::impl {

// What every implementation interface offers its registry: a cheap yes or no for the hot path,
// and the reason only when a refusal is written. An implementation writes one function, refusal,
// returning a string literal, so asking costs no allocation.
template <typename Problem>
class Supports {
 public:
  virtual ~Supports() = default;
  bool supports(const Problem& p) const { return refusal(p) == nullptr; }
  // "" when supported; else why not, phrased after "kernels.<family>=<name> ", e.g. "does not support it".
  std::string explain(const Problem& p) const {
    const char* why = refusal(p);
    return why ? why : "";
  }

 private:
  // nullptr when this implementation runs `p`; else why not (see explain).
  virtual const char* refusal(const Problem& p) const = 0;
};

// The kernels.* values (and the CPU's fixed choices) an implementation is selected by: an enum, so
// that a rule naming an implementation no entry answers to is a compile error, not a silent miss.
enum class ImplKey { none, reference, im2col, winograd, winograd2, direct, channels_last, cudnn, native, cublas };

// The implementations that may run a problem, as the family's rule says: entries are matched by
// their `selected_by`, in this order. `named`: the configuration named one implementation
// (kernels.conv=native), whose own reason a refusal then gives.
struct Selection {
  static constexpr size_t kMax = 3;
  std::array<ImplKey, kMax> keys{};  // unused slots stay ImplKey::none
  std::string_view choice = "auto";           // the kernels.* value, for messages
  bool named = false;
};

// Why the emulated GPU lacks a named implementation: it runs cudagrad's own kernels, and the vendor
// libraries are not emulated.
inline constexpr const char* kEmulationNote =
    "; the emulated GPU runs cudagrad's own kernels, not cuDNN or cuBLAS: choose native";

template <typename Interface>
class Registry {
 public:
  struct Entry {
    std::string name;         // what messages call it: "cudnn", "native", "cpu reference"
    DeviceType device;        // where it runs
    ImplKey selected_by;      // the value a Selection names it by: cudnn, winograd, reference
    std::shared_ptr<const Interface> impl;
  };

  // Removes its fake when destroyed (tests).
  class FakeHandle {
   public:
    explicit FakeHandle(Registry* r) : registry_(r) {}
    ~FakeHandle() {
      if (registry_) delete registry_->fake_.exchange(nullptr);
    }
    FakeHandle(FakeHandle&& o) noexcept : registry_(o.registry_) { o.registry_ = nullptr; }
    FakeHandle(const FakeHandle&) = delete;
    FakeHandle& operator=(const FakeHandle&) = delete;

   private:
    Registry* registry_;
  };

  Registry(std::string family, std::vector<Entry> entries) : family_(std::move(family)), entries_(std::move(entries)) {}
  ~Registry() { delete fake_.load(); }
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  const std::string& family() const { return family_; }
  // Every implementation registered in this build, in registration order (the tests' fake is not one).
  const std::vector<Entry>& entries() const { return entries_; }

  // The implementation for `problem` (its `device`, `dtype` and, for the families that have one,
  // `layout` say where and what it runs) that `selection` prefers; `layer` names the layer and its
  // shapes for a refusal.
  template <typename Problem>
  std::shared_ptr<const Interface> pick(const Problem& problem, const Selection& selection,
                                        const std::string& layer) const {
    return pick(problem, selection, [&] { return layer; });
  }
  // The same with the layer's description made only for a refusal.
  template <typename Problem, std::invocable Describe>
  std::shared_ptr<const Interface> pick(const Problem& problem, const Selection& selection,
                                        const Describe& describe) const {
    for (ImplKey key : selection.keys) {
      if (key == ImplKey::none) break;
      if (auto impl = first_supporting(problem, key)) return impl;
    }
    refuse(problem, selection, describe());
  }

  // The implementation selected by `key` that runs `problem` (the tests' fake first), or null.
  template <typename Problem>
  std::shared_ptr<const Interface> first_supporting(const Problem& problem, ImplKey key) const {
    const Entry* fake = fake_.load(std::memory_order_acquire);
    if (fake && matches(*fake, problem.device.type, key) && fake->impl->supports(problem)) return fake->impl;
    for (const Entry& e : entries_)
      if (matches(e, problem.device.type, key) && e.impl->supports(problem)) return e.impl;
    return nullptr;
  }

  // The name `impl` was registered under ("" when it is not registered): for tests and messages.
  std::string name_of(const Interface* impl) const {
    if (const Entry* fake = fake_.load(std::memory_order_acquire); fake && fake->impl.get() == impl) return fake->name;
    for (const Entry& e : entries_)
      if (e.impl.get() == impl) return e.name;
    return "";
  }

  // Tests: `entry` comes first among the entries of its device and selecting value until the
  // handle is destroyed. One fake at a time; not to be called while another thread picks.
  [[nodiscard]] FakeHandle put_first(Entry entry) {
    CG_CHECK(fake_.load() == nullptr, "{} registry: one fake at a time", family_);
    fake_.store(new Entry(std::move(entry)), std::memory_order_release);
    return FakeHandle(this);
  }

 private:
  static bool matches(const Entry& e, DeviceType device, ImplKey key) {
    return e.device == device && e.selected_by == key;
  }

  // The candidates' reasons, each after its name unless the configuration named the implementation.
  template <typename Problem>
  std::vector<std::string> refusals(const Problem& problem, const Selection& selection) const {
    std::vector<std::string> out;
    const Entry* fake = fake_.load(std::memory_order_acquire);
    for (ImplKey key : selection.keys) {
      if (key == ImplKey::none) break;
      if (fake && matches(*fake, problem.device.type, key)) out.push_back(reason(*fake, problem, selection.named));
      for (const Entry& e : entries_)
        if (matches(e, problem.device.type, key)) out.push_back(reason(e, problem, selection.named));
    }
    return out;
  }
  template <typename Problem>
  static std::string reason(const Entry& e, const Problem& problem, bool named) {
    return named ? e.impl->explain(problem) : e.name + ": " + e.impl->explain(problem);
  }

  // Throws the error for a layer that `pick` found nothing for.
  template <typename Problem>
  [[noreturn]] void refuse(const Problem& problem, const Selection& selection, const std::string& layer) const {
    // Layout only where the family has one (convolution, batch norm).
    std::string what = fmt::format("{} ({}", layer, dtype_name(problem.dtype));
    if constexpr (requires { problem.layout; })
      what += problem.layout == Layout::nhwc ? " channels-last" : " NCHW";
    what += ")";
    const std::vector<std::string> why = refusals(problem, selection);
    if (selection.named && !why.empty())
      CG_FAIL("{}: kernels.{}={} {}", what, family_, selection.choice, fmt::join(why, "; "));
    if (selection.named)
      CG_FAIL("{}: kernels.{}={} is not in this build (nothing registered for {}){}", what, family_, selection.choice,
              problem.device.str(), kernels::kGpuEmulation ? kEmulationNote : "");
    CG_FAIL("{}: no {} implementation on {} supports it ({})", what, family_, problem.device.str(),
            why.empty() ? std::string("none registered") : fmt::format("{}", fmt::join(why, "; ")));
  }

  std::string family_;
  std::vector<Entry> entries_;
  std::atomic<const Entry*> fake_{nullptr};
};

}  // namespace cg::impl
