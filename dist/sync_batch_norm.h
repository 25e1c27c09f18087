// SyncBatchNorm, as PyTorch's torch.nn.SyncBatchNorm.convert_sync_batchnorm: every BatchNorm2d of
// a model gets a cross-replica hook (engine/cross_replica.h) over the job's GradientComm, so in
// training mode its statistics are those of all ranks' batches together (each rank weighing by
// its own batch size) and its backward sums the two per-channel gradient sums over the ranks:
// one float64 all-reduce per layer per direction. Eval mode is unchanged.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "dist/gradient_comm.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace cg::dist {

// Holds the attachment: its destructor detaches the hooks (they refer to `comm`, so this must not
// outlive it; the trainer's session keeps it beside DDP, whose transport it uses).
class SyncBatchNorm {
 public:
  // Attaches a hook named after each layer's dotted name ("layer1.0.bn1") to every BatchNorm2d
  // of `model`. The model must outlive this object.
  SyncBatchNorm(nn::Module& model, GradientComm& comm);
  ~SyncBatchNorm();
  SyncBatchNorm(const SyncBatchNorm&) = delete;
  SyncBatchNorm& operator=(const SyncBatchNorm&) = delete;

  size_t num_layers() const { return layers_.size(); }
  // The collectives' names in timelines and errors: "SyncBatchNorm forward layer1.0.bn1".
  static std::string collective_name(const std::string& layer, CrossReplicaSum::Pass pass);

 private:
  std::vector<nn::BatchNorm2d*> layers_;
};

}  // namespace cg::dist
