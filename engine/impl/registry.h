// Which implementation runs an op: one registry per op family (convolution, batch norm, ...),
// in the spirit of Caffe's layer registry. Each implementation is an object behind the family's
// interface (engine/impl/<family>.h), registered once with the device it runs on and the
// kernels.* name that selects it; the op asks the registry for one from the problem at hand
// (device, dtype, layout, shape) and the configured choice, and keeps the object it got for the
// backward pass. The choice is made here and nowhere else:
//   - a named choice (kernels.conv=native) takes that implementation, or refuses the layer;
//   - automatic takes the highest-priority implementation that supports the problem;
//   - nothing fitting is refused with a message naming the layer and its shapes.
// Built-in implementations are added by the family's registry function (one line each);
// tests add fakes with add(), which returns a handle that removes them again.
#pragma once
#include <algorithm>
#include <concepts>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <fmt/ranges.h>

#include "engine/device.h"
#include "engine/ops.h"
#include "util/layout.h"
#include "util/check.h"

namespace cg::impl {

// The configured implementation for a family: automatic, or one selected by its name
// ("cudnn", "native"). On the CPU there is one implementation per family, and the choice is
// ignored (it only names GPU implementations).
using Choice = ops::GpuImpl;
const char* choice_name(Choice choice);

template <typename Interface>
class Registry {
 public:
  struct Entry {
    std::string name;     // what messages call it: "cudnn", "native", "cpu reference"
    DeviceType device;    // where it runs
    Choice selected_by;   // the kernels.* value that names it (automatic: the CPU's only one)
    int priority = 0;     // under automatic, the highest supported wins
    std::shared_ptr<const Interface> impl;
  };

  // Removes its entry when destroyed (tests' fakes).
  class Handle {
   public:
    Handle(Registry* r, const Interface* impl) : registry_(r), impl_(impl) {}
    ~Handle() {
      if (registry_) registry_->remove(impl_);
    }
    Handle(Handle&& o) noexcept : registry_(o.registry_), impl_(o.impl_) { o.registry_ = nullptr; }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;

   private:
    Registry* registry_;
    const Interface* impl_;
  };

  explicit Registry(std::string family) : family_(std::move(family)) {}

  [[nodiscard]] Handle add(Entry entry) {
    std::lock_guard<std::mutex> lock(mutex_);
    const Interface* impl = entry.impl.get();
    entries_.push_back(std::move(entry));
    return Handle(this, impl);
  }
  void add_builtin(Entry entry) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_.push_back(std::move(entry));
  }

  // The implementation for `problem` (its `device`, `dtype` and, for the families that have one,
  // `layout` say where and what it runs) under `choice`; `layer` names the layer and its shapes for the refusal.
  template <typename Problem>
  std::shared_ptr<const Interface> pick(const Problem& problem, Choice choice, const std::string& layer) const {
    return pick(problem, choice, [&] { return layer; });
  }
  // The same with the layer's description made only for a refusal (ops called per element
  // batch need not format one every call).
  template <typename Problem, std::invocable Describe>
  std::shared_ptr<const Interface> pick(const Problem& problem, Choice choice, const Describe& describe) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool named = problem.device.is_cuda() && choice != Choice::automatic;
    const Entry* best = nullptr;
    std::vector<std::string> refusals;
    for (const Entry& e : entries_) {
      if (e.device != problem.device.type || (named && e.selected_by != choice)) continue;
      const std::string why = e.impl->why_unsupported(problem);
      if (!why.empty()) refusals.push_back(named ? why : e.name + ": " + why);
      else if (!best || e.priority > best->priority) best = &e;
    }
    if (best) return best->impl;
    refuse(problem, choice, named, describe(), refusals);
  }

  const std::string& family() const { return family_; }
  // Every registered entry, in registration order (a copy: the conformance tests run each one).
  std::vector<Entry> entries() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_;
  }
  // The name `impl` was registered under ("" when it is not registered): for tests and messages.
  std::string name_of(const Interface* impl) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Entry& e : entries_)
      if (e.impl.get() == impl) return e.name;
    return "";
  }

 private:
  // Throws the error for a layer that `pick` found nothing for: `named` when the configuration
  // named one implementation (its refusal is then the implementation's own reason), else under
  // automatic, with each implementation's reason (`refusals`) after its name.
  template <typename Problem>
  [[noreturn]] void refuse(const Problem& problem, Choice choice, bool named, const std::string& layer,
                           const std::vector<std::string>& refusals) const {
    // Layout only where the family has one (convolution, batch norm, pooling): an optimizer update
    // or a loss has none to name.
    std::string what = fmt::format("{} ({}", layer, dtype_name(problem.dtype));
    if constexpr (requires { problem.layout; })
      what += problem.layout == Layout::nhwc ? " channels-last" : " NCHW";
    what += ")";
    if (named && !refusals.empty())
      CG_FAIL("{}: kernels.{}={} {}", what, family_, choice_name(choice), fmt::join(refusals, "; "));
    if (named)
      CG_FAIL("{}: kernels.{}={} is not available on {}", what, family_, choice_name(choice), problem.device.str());
    CG_FAIL("{}: no {} implementation on {} supports it ({})", what, family_, problem.device.str(),
            refusals.empty() ? std::string("none registered") : fmt::format("{}", fmt::join(refusals, "; ")));
  }

  void remove(const Interface* impl) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::erase_if(entries_, [&](const Entry& e) { return e.impl.get() == impl; });
  }

  std::string family_;
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
};

}  // namespace cg::impl
