// The loss family's conformance (cross-entropy over logits and int64 labels): its table of
// [rows, classes], the float64 reference (mean negative log-softmax at the label, the argmax hits,
// the gradient) and the check of one device on one row in one dtype. The loss is a
// device switch, so each device is the implementation: the suite runs ops::cross_entropy on that
// device's tensors and its backward through autograd, seeded with the loss's gradient. The softmax
// the op keeps for its backward is not public: it is checked through dlogits, which is
// dloss * (softmax - one_hot) / rows.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "conformance/conformance.h"
#include "engine/ops.h"

namespace cg::test {

struct LossRow {
  std::string name;
  int64_t n, classes;
};

// One row, two classes, Fashion-MNIST's ten, and more classes than a warp or block holds.
inline std::vector<LossRow> loss_rows() {
  return {{"one_row", 1, 10}, {"two_classes", 5, 2}, {"batch", 7, 10}, {"many_classes", 3, 1030}};
}

using LossParam = Param<DeviceSwitch, LossRow>;
constexpr double kDLoss = 0.75;  // the loss's gradient fed to the backward

struct LossResults {
  std::vector<double> loss, hits, dlogits;
};

inline std::vector<int64_t> loss_labels(const LossRow& r) {
  std::vector<int64_t> labels(size_t(r.n));
  for (int64_t i = 0; i < r.n; ++i) labels[size_t(i)] = (i * 7 + 3) % r.classes;
  return labels;
}

inline LossResults loss_reference(const LossRow& r, const std::vector<double>& logits,
                                  const std::vector<int64_t>& labels) {
  LossResults out{{0.0}, {0.0}, std::vector<double>(logits.size())};
  for (int64_t i = 0; i < r.n; ++i) {
    const double* row = &logits[size_t(i * r.classes)];
    int64_t best = 0;
    for (int64_t j = 1; j < r.classes; ++j)
      if (row[j] > row[best]) best = j;
    double sum = 0;
    for (int64_t j = 0; j < r.classes; ++j) sum += std::exp(row[j] - row[best]);
    for (int64_t j = 0; j < r.classes; ++j) {
      const double prob = std::exp(row[j] - row[best]) / sum;
      out.dlogits[size_t(i * r.classes + j)] = kDLoss * (prob - (j == labels[size_t(i)] ? 1.0 : 0.0)) / double(r.n);
    }
    out.loss[0] += (std::log(sum) - (row[labels[size_t(i)]] - row[best])) / double(r.n);
    out.hits[0] += best == labels[size_t(i)] ? 1 : 0;
  }
  return out;
}

inline LossResults run_loss(const LossParam& p, const std::vector<double>& logits, const std::vector<int64_t>& labels) {
  const LossRow& r = p.c;
  const Device device = device_of(p.implementation.device);
  Tensor x = tensor_of(logits, {r.n, r.classes}, p.dtype, device);
  x.set_requires_grad(true);
  const Tensor lab = Tensor::from_vector(labels, {r.n}).to(device);
  Tensor hits;
  const Tensor loss = ops::cross_entropy(x, lab, &hits);
  loss.backward(Tensor::scalar(kDLoss, loss.dtype()).to(device));
  return {values_of(loss), values_of(hits), values_of(x.grad())};
}

inline void expect_loss_conforms(const LossParam& p) {
  const std::vector<double> logits = random_values(p.c.n * p.c.classes, 51, p.dtype, 2.0);
  const std::vector<int64_t> labels = loss_labels(p.c);
  const LossResults ref = loss_reference(p.c, logits, labels), got = run_loss(p, logits, labels);
  const Tolerance tol = budget_for(p.dtype, p.implementation.device);
  EXPECT_TRUE(matches_reference(got.loss, ref.loss, tol)) << "loss";
  EXPECT_EQ(got.hits, ref.hits) << "hits (rows whose argmax is the label)";
  EXPECT_TRUE(matches_reference(got.dlogits, ref.dlogits, tol)) << "dlogits";
}

inline std::vector<LossParam> loss_params(DeviceType device) {
  // The GPU computes the loss in float32 (half logits are cast first): it is run in float32.
  return device_params(device, loss_rows(), device == DeviceType::cpu ? dtypes_on(device) : std::vector{DType::f32});
}

}  // namespace cg::test
