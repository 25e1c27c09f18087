// CPU reference for cross-entropy over log-softmax: loss = mean_i -log softmax(logits_i)[label_i],
// computed with log-sum-exp so large logits do not overflow.
#pragma once
#include <cstdint>

namespace cg::kernels::cpu {

// logits [n, classes], labels [n] in [0, classes). Writes the mean loss to *loss and the softmax
// probabilities to probs [n, classes] (saved for backward). Returns the number of rows whose
// argmax equals the label (accuracy comes for free).
template <typename T>
int64_t cross_entropy_forward(int64_t n, int64_t classes, const T* logits, const int64_t* labels,
                              T* loss, T* probs);
// dlogits = dloss * (probs - onehot(label)) / n
template <typename T>
void cross_entropy_backward(int64_t n, int64_t classes, T dloss, const T* probs,
                            const int64_t* labels, T* dlogits);

}  // namespace cg::kernels::cpu
