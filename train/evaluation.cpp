#include "train/evaluation.h"

#include "data/device_feeder.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "engine/autograd/grad_mode.h"
#include "engine/ops.h"
#include "train/builders.h"
#include "train/window_stats.h"

namespace cg::train {

EvalResult evaluate(nn::MiniResNet& model, const data::Dataset& test_set, const TrainConfig& c, DistContext& dc,
                    Device device) {
  autograd::NoGradGuard no_grad;
  ops::ExecutionScope in_context(execution_context(c));  // as the training step's forward runs
  model.eval();
  data::DistributedSampler sampler(test_set.size(), dc.rank(), dc.world_size(),
                                   {.shuffle = false, .seed = 0, .drop_last = false, .pad = false});
  data::LoaderOptions lo;
  lo.batch_size = c.train.eval_batch_size;
  lo.num_workers = int(c.data.num_workers);
  lo.drop_last = false;
  data::DataLoader loader(test_set, sampler, lo);
  data::DeviceFeeder feeder(loader, device, current_stream(device));
  feeder.start_epoch(0, 0);
  WindowStats stats;
  const auto start = Clock::now();
  while (auto batch = feeder.next()) {
    Tensor hits;
    const Tensor loss = ops::cross_entropy(model(batch->images), batch->labels, &hits);
    stats.add(loss, hits, batch->size);
  }
  model.train();
  const WindowSums w = stats.flush(0);
  std::vector<double> sums{w.loss_sum, w.correct, w.images};
  dc.all_reduce_sum(sums);
  EvalResult r;
  r.loss = sums[0] / std::max(sums[2], 1.0);
  r.accuracy = sums[1] / std::max(sums[2], 1.0);
  r.images = int64_t(sums[2]);
  r.images_per_s = sums[2] / std::max(seconds_since(start), 1e-9);
  return r;
}

}  // namespace cg::train
