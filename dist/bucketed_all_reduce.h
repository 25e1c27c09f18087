// The plain DDP reducer (dist/reducer.h): the moment a bucket's last gradient is final, its
// average over the ranks is issued on the communication thread or stream (after an event on the
// compute stream, on a GPU) while backward goes on; wait_for_gradients() waits for all of them.
#pragma once
#include "dist/gradient_comm.h"
#include "dist/reducer.h"

namespace cg::dist {

class BucketedAllReduce : public Reducer {
 public:
  // `comm` (the transport, or the 16-bit decorator over it) must outlive this object.
  BucketedAllReduce(const nn::NamedTensors& params, GradientComm& comm, const BucketOptions& options);

  void prepare_for_backward(bool sync) override { buckets_.prepare(sync); }
  void gradient_ready(size_t param) override;
  void wait_for_gradients() override;
  void zero_grad() override { buckets_.zero(); }
  void start_parameter_gather() override {}  // every rank updated every parameter
  void wait_for_parameters() override {}
  void attach(nn::Optimizer& optimizer) override { optimizer_ = &optimizer; }
  nn::NamedTensors full_optimizer_state() override;
  Resident resident_bytes() const override;
  std::string describe() const override;
  const GradientBuckets& buckets() const override { return buckets_; }

 private:
  GradientComm& comm_;
  GradientBuckets buckets_;
  nn::Optimizer* optimizer_ = nullptr;
};

}  // namespace cg::dist
