// One CrossReplicaSum per BatchNorm2d layer, over the job's GradientComm (see sync_batch_norm.h).
#include "dist/sync_batch_norm.h"

#include "util/check.h"
#include "util/nvtx.h"

namespace cg::dist {
namespace {

class LayerSum : public CrossReplicaSum {
 public:
  LayerSum(GradientComm& comm, std::string layer) : comm_(comm), layer_(std::move(layer)) {}
  void sum(Tensor& values, Pass pass) override {
    CG_CHECK(values.dtype() == DType::f64, "SyncBatchNorm {}: the statistics {} must be float64", layer_,
             values.str());
    const std::string what = SyncBatchNorm::collective_name(layer_, pass);
    CG_NVTX_RANGE("SyncBatchNorm all-reduce");
    comm_.all_reduce_sum(values.data<double>(), values.numel(), current_stream(values.device()), what);
  }

 private:
  GradientComm& comm_;
  std::string layer_;
};

}  // namespace

std::string SyncBatchNorm::collective_name(const std::string& layer, CrossReplicaSum::Pass pass) {
  return fmt::format("SyncBatchNorm {} {}", pass == CrossReplicaSum::Pass::forward ? "forward" : "backward", layer);
}

SyncBatchNorm::SyncBatchNorm(nn::Module& model, GradientComm& comm) {
  model.for_each_module([&](const std::string& name, nn::Module& m) {
    if (auto* bn = dynamic_cast<nn::BatchNorm2d*>(&m)) {
      bn->set_cross_replica(std::make_shared<LayerSum>(comm, name.empty() ? "batch_norm" : name));
      layers_.push_back(bn);
    }
  });
}

SyncBatchNorm::~SyncBatchNorm() {
  for (nn::BatchNorm2d* bn : layers_) bn->set_cross_replica(nullptr);
}

}  // namespace cg::dist
