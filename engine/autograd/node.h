// The backward graph. Every differentiable op records one Node per output tensor; the Node knows
// how to turn the gradient of that output into gradients of the op's inputs, and where each input
// gradient goes next (an Edge). Leaves end in an AccumulateGrad node.
// Rule: every op here has exactly one differentiable output, so a Node takes one gradient in.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace cg::autograd {

class Node;

// Where an input's gradient goes: the node that produced that input (null when the input needs
// no gradient).
struct Edge {
  std::shared_ptr<Node> fn;
  bool valid() const { return fn != nullptr; }
};

class Node {
 public:
  Node();
  // Releases the nodes that only this one kept alive without recursion (node.cpp): a graph
  // tens of thousands of nodes deep, a deep enough model's, would otherwise overflow the stack.
  virtual ~Node();

  // Gradients for the inputs, one per next edge, given the gradient of the output. An entry may
  // be undefined when the corresponding edge is invalid (that input needs no gradient).
  virtual std::vector<Tensor> apply(const Tensor& grad_output) = 0;
  virtual std::string name() const = 0;
  // Frees saved tensors after backward has used them (a graph is run once).
  virtual void release_saved() {}

  // Does input i need a gradient? Ops skip computing gradients nobody wants.
  bool needs_grad(size_t i) const { return i < next_edges.size() && next_edges[i].valid(); }

  std::vector<Edge> next_edges;
  // Creation order; backward runs ready nodes newest first, so gradients of the last layers
  // become final first, the order data-parallel buckets want.
  uint64_t sequence_nr;
};

// The sink for a leaf: adds the incoming gradient into leaf.grad, then tells the leaf's
// grad-ready hooks. Runs only when every path to the leaf has delivered its contribution, so the
// hooks fire exactly when the gradient is final for this backward pass.
class AccumulateGrad : public Node {
 public:
  // Highest priority (as in PyTorch): a leaf's gradient is accumulated, and its hooks fire, as soon
  // as it is complete, not after every op node created later in the forward has run.
  explicit AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf) : leaf_(leaf) {
    sequence_nr = UINT64_MAX;
  }
  std::vector<Tensor> apply(const Tensor& grad_output) override;
  std::string name() const override { return "AccumulateGrad"; }

 private:
  std::weak_ptr<TensorImpl> leaf_;  // weak: the leaf owns this node, not the other way round
};

// True when no other handle or view shares t's data, so it may be modified or adopted in place.
bool is_exclusive(const Tensor& t);

// True when any of `inputs` needs a gradient and grad mode is on: the op must record a Node.
bool any_requires_grad(std::initializer_list<const Tensor*> inputs);

// Links `node` to the inputs (an edge per input, in order) and makes it the grad_fn of `output`.
void connect(Tensor& output, const std::shared_ptr<Node>& node,
             std::initializer_list<const Tensor*> inputs);

}  // namespace cg::autograd
