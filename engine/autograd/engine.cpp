#include "engine/autograd/engine.h"

#include <queue>
#include <unordered_map>

#include "engine/autograd/grad_mode.h"
#include "engine/autograd/node.h"
#include "engine/ops.h"

namespace cg::autograd {
namespace {

// a + b, in a's memory when nobody else can see it (the common case), else in a new tensor.
Tensor sum_gradients(Tensor a, const Tensor& b) {
  CG_CHECK(a.shape() == b.shape() && a.dtype() == b.dtype(), "gradients {} and {} do not add",
           a.str(), b.str());
  Tensor out = is_exclusive(a) ? a : a.clone();
  ops::accumulate_(out, b);
  return out;
}

struct NewestFirst {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

// For every node reachable from root, how many edges lead into it: a node runs when all have
// delivered.
std::unordered_map<Node*, int> count_dependencies(Node* root) {
  std::unordered_map<Node*, int> pending;
  std::vector<Node*> stack{root};
  pending[root] = 0;
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    for (const Edge& e : node->next_edges) {
      if (!e.valid()) continue;
      if (pending[e.fn.get()]++ == 0) stack.push_back(e.fn.get());
    }
  }
  return pending;
}

// Adds `grad` to the gradient waiting in `slot` (undefined when none is yet).
void deliver(Tensor& slot, const Tensor& grad) {
  if (slot.defined()) {
    Tensor held = std::move(slot);  // the inbox's handle moves out: exclusive if unshared
    slot = sum_gradients(std::move(held), grad);
  } else {
    slot = grad;
  }
}

}  // namespace

void backward(const Tensor& root, const Tensor& grad_output) {
  CG_CHECK(root.requires_grad(), "backward() on a tensor that does not require grad");
  Tensor grad = grad_output;
  if (!grad.defined()) {
    CG_CHECK(root.numel() == 1, "backward() without a gradient needs a scalar, got {}", root.str());
    grad = Tensor::full(root.shape(), 1.0, root.dtype(), root.device());
  }
  // Backward itself records nothing (gradients of gradients are out of scope).
  NoGradGuard no_grad;

  std::shared_ptr<Node> root_fn = root.grad_fn();
  if (!root_fn) {  // backward on a leaf: just accumulate
    AccumulateGrad(root.impl_ptr()).apply(grad);
    return;
  }

  std::unordered_map<Node*, int> pending = count_dependencies(root_fn.get());

  // Gradients waiting for their node; shared_ptrs keep nodes alive while queued.
  std::unordered_map<Node*, Tensor> inbox;
  std::unordered_map<Node*, std::shared_ptr<Node>> alive;
  std::priority_queue<Node*, std::vector<Node*>, NewestFirst> ready;
  inbox[root_fn.get()] = grad;
  alive[root_fn.get()] = root_fn;
  ready.push(root_fn.get());

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    Tensor node_grad = std::move(inbox[node]);
    inbox.erase(node);
    std::vector<Tensor> input_grads;
    if (node_grad.defined()) input_grads = node->apply(node_grad);
    node->release_saved();
    for (size_t i = 0; i < node->next_edges.size(); ++i) {
      const Edge& e = node->next_edges[i];
      if (!e.valid()) continue;
      Node* next = e.fn.get();
      if (i < input_grads.size() && input_grads[i].defined()) deliver(inbox[next], input_grads[i]);
      alive.emplace(next, e.fn);
      if (--pending[next] == 0) ready.push(next);
    }
    alive.erase(node);
  }
}

}  // namespace cg::autograd

namespace cg {

// Defined here, beside the backward it calls, so that tensor.cpp needs nothing from autograd/ (the
// two folders include each other in one direction only).
void Tensor::backward(const Tensor& grad_output) const { autograd::backward(*this, grad_output); }

}  // namespace cg
