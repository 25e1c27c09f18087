#include "engine/autograd/node.h"

#include <atomic>

#include "engine/autograd/grad_mode.h"
#include "engine/ops.h"

namespace cg::autograd {
namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};

// The edge that carries a gradient into `t`: its producer, or its accumulator when a leaf.
Edge edge_to(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  TensorImpl& impl = t.impl();
  if (impl.grad_fn) return {impl.grad_fn};
  if (!impl.grad_accumulator)
    impl.grad_accumulator = std::make_shared<AccumulateGrad>(t.impl_ptr());
  return {impl.grad_accumulator};
}
}  // namespace

Node::Node() : sequence_nr(g_next_sequence_nr++) {}

namespace {
// The nodes waiting to be destroyed by the outermost ~Node running on this thread, or null.
thread_local std::vector<std::shared_ptr<Node>>* t_dying = nullptr;
}  // namespace

// Destroying a node drops its edges; a producer whose last owner was such an edge would be
// destroyed inside this destructor, and its producer inside that one: a stack frame per node of
// the chain. Instead the outermost destructor on the thread keeps a list: every destructor (its
// own and the nested ones) moves the producers it alone owns onto it and returns, and the
// outermost one destroys them one at a time from the list, at constant depth.
Node::~Node() {
  auto adopt_sole_owned = [](std::vector<Edge>& edges, std::vector<std::shared_ptr<Node>>& into) {
    for (Edge& e : edges)
      if (e.fn && e.fn.use_count() == 1) into.push_back(std::move(e.fn));
  };
  if (t_dying) {
    adopt_sole_owned(next_edges, *t_dying);
    return;
  }
  std::vector<std::shared_ptr<Node>> dying;
  adopt_sole_owned(next_edges, dying);
  if (dying.empty()) return;
  t_dying = &dying;
  while (!dying.empty()) {
    std::shared_ptr<Node> node = std::move(dying.back());
    dying.pop_back();
    node.reset();  // its ~Node appends what it alone owned
  }
  t_dying = nullptr;
}

bool is_exclusive(const Tensor& t) {
  // One handle (the caller's) and one owner of the storage (no view): nobody else can see it.
  return t.impl_ptr().use_count() == 1 && t.impl().storage.use_count() == 1;
}

std::vector<Tensor> AccumulateGrad::apply(const Tensor& grad_output) {
  auto leaf_impl = leaf_.lock();
  if (!leaf_impl || !grad_output.defined()) return {};
  Tensor leaf(leaf_impl);
  CG_CHECK(grad_output.shape() == leaf.shape(), "gradient {} for parameter {}", grad_output.str(),
           leaf.str());
  Tensor grad = leaf.grad();
  if (!grad.defined()) {
    // Adopt the incoming tensor when nothing else can see it; otherwise copy, since it may be
    // shared with another branch of the graph and a later backward accumulates into .grad.
    const bool exclusive = grad_output.dtype() == leaf.dtype() && is_exclusive(grad_output);
    leaf.set_grad(exclusive ? grad_output : grad_output.to(leaf.dtype()).clone());
  } else {
    CG_CHECK(grad.dtype() == grad_output.dtype(), "gradient dtype {} for .grad of dtype {}",
             dtype_name(grad_output.dtype()), dtype_name(grad.dtype()));
    ops::accumulate_(grad, grad_output);
  }
  for (auto& hook : leaf_impl->grad_ready_hooks) hook(leaf);
  return {};
}

bool any_requires_grad(std::initializer_list<const Tensor*> inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor* t : inputs)
    if (t && t->defined() && t->requires_grad()) return true;
  return false;
}

void connect(Tensor& output, const std::shared_ptr<Node>& node,
             std::initializer_list<const Tensor*> inputs) {
  node->next_edges.clear();
  for (const Tensor* t : inputs) node->next_edges.push_back(t ? edge_to(*t) : Edge{});
  output.impl().grad_fn = node;
  output.impl().requires_grad = true;
}

}  // namespace cg::autograd
