#include "apps/common/trainer.h"

#include <omp.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <thread>

#include "apps/common/distributed.h"
#include "apps/common/graphed_step.h"
#include "apps/common/metrics.h"
#include "apps/common/resident_feeder.h"
#include "apps/common/train_step.h"
#include "apps/common/training_parts.h"
#include "apps/common/window_stats.h"
#include "data/dataset_factory.h"
#include "data/loader.h"
#include "data/sampler.h"
#include "dist/ddp.h"
#include "engine/autograd/grad_mode.h"
#include "engine/device_allocator.h"
#include "engine/ops.h"
#include "engine/stream.h"
#include "kernels/cuda/device_info.h"
#include "nn/checkpoint.h"
#include "nn/lr_schedule.h"
#include "nn/miniresnet.h"
#include "util/atomic_file.h"
#include "util/log.h"
#include "util/progress.h"
#include "util/trace.h"

namespace cg::apps {
namespace fs = std::filesystem;
namespace {

std::atomic<int> g_stop_signal{0};
// Taken during static initialization, before main: the start of "time to accuracy".
const Clock::time_point process_start = Clock::now();
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

}  // namespace

void install_stop_signal_handlers() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

TrainResult train(const TrainConfig& c, const std::string& config_yaml) {
  DistContext dc(c.dist.timeout_s);
  trace::set_enabled(c.profile.enabled);
  dc.check_same_config(config_yaml);
  // Ranks on one machine share its cores.
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  const int threads = c.train.threads > 0 ? int(c.train.threads) : std::max(1, cores / std::max(1, dc.world_size()));
  omp_set_num_threads(threads);
  const Device device = choose_device(c, dc.identity().local_rank);
  if (c.train.cuda_graph && !device.is_cuda())
    throw UsageError("train.cuda_graph=true needs a GPU, and train.device=auto found none; set it false");
  // Every op of this thread runs on one compute stream (non-blocking: it overlaps the loader's
  // copy stream and the communication stream, ordered by events only).
  const Stream compute = device.is_cuda() ? Stream::create(device) : Stream();
  StreamGuard on_compute(compute);

  const fs::path out_dir = c.output.dir;
  const fs::path ckpt_dir = c.checkpoint.dir.empty() ? out_dir / "checkpoints" : fs::path(c.checkpoint.dir);
  if (log::is_main_process()) {
    fs::create_directories(out_dir);
    write_file_atomically((out_dir / "config.yaml").string(), config_yaml);
  }

  auto train_set = make_split(c, true);
  auto test_set = make_split(c, false);
  CG_CHECK(train_set->channels() == c.model.in_channels,
           "model.in_channels={} but {} images have {} channel(s)", c.model.in_channels,
           train_set->name(), train_set->channels());
  log::info("data: {} train {} / test {} images, {}x{}x{}", train_set->name(), train_set->size(),
            test_set->size(), train_set->channels(), train_set->height(), train_set->width());

  Generator gen(uint64_t(c.train.seed));
  const nn::MiniResNetOptions mo = model_options(c);
  nn::MiniResNet model(mo, gen);
  int64_t n_params = 0;
  for (auto& [name, t] : model.named_parameters()) n_params += t.numel();
  log::info("model: MiniResNet widths {} blocks {}, {} parameters", shape_str(mo.widths),
            shape_str(mo.blocks), n_params);
  if (!c.model.init_from.empty()) {
    nn::load_model_weights(c.model.init_from, model);
    log::info("model: weights from {}", c.model.init_from);
  }
  model.to(device);
  auto optimizer = make_optimizer(c, model);
  const std::string optim_name = c.optim.name == OptimizerName::sgd ? "sgd" : "adamw";

  data::DistributedSampler sampler(train_set->size(), dc.rank(), dc.world_size(), c.data.shuffle,
                                   uint64_t(c.train.seed), true);
  data::LoaderOptions lo;
  lo.batch_size = c.data.batch_size;
  lo.num_workers = int(c.data.num_workers);
  lo.drop_last = true;
  lo.augment.enabled = c.data.augment;
  lo.seed = uint64_t(c.train.seed);
  lo.rank = dc.rank();  // augmentation differs per rank: seed, rank, epoch and sample
  data::DataLoader loader(*train_set, sampler, lo);
  const int64_t batches_per_epoch = loader.batches_per_epoch();
  CG_CHECK(batches_per_epoch > 0, "data.batch_size={} is larger than the {} training images",
           c.data.batch_size, train_set->size());
  const int64_t accum = c.train.grad_accum_steps;
  const int64_t steps_per_epoch = (batches_per_epoch + accum - 1) / accum;
  int64_t total_steps = steps_per_epoch * c.train.epochs;
  if (c.train.max_steps > 0) total_steps = std::min(total_steps, c.train.max_steps);

  nn::ScheduleOptions so;
  so.kind = schedule_kind(c);
  so.base_lr = c.optim.lr;
  so.min_lr = c.sched.min_lr;
  so.warmup_steps = c.sched.warmup_steps;
  so.total_steps = steps_per_epoch * c.train.epochs;
  so.steps_per_epoch = steps_per_epoch;
  so.epochs = c.train.epochs;
  const nn::LrSchedule schedule(so);

  nn::TrainingProgress pos;
  pos.optimizer = optim_name;
  pos.config_yaml = config_yaml;
  std::string resume_from = c.checkpoint.resume_from;
  std::pair<double, int64_t> resumed_scale{0, 0};
  if (resume_from.empty() && restarted_by_launcher()) resume_from = latest_checkpoint(ckpt_dir);
  if (!resume_from.empty()) {
    dc.barrier();  // the file is complete before anyone reads it
    pos = nn::load_checkpoint(resume_from, model, *optimizer);
    resumed_scale = {pos.loss_scale, pos.loss_scale_growth_tracker};
    CG_CHECK(pos.optimizer == optim_name, "checkpoint {} was written by optimizer '{}', config says '{}'",
             resume_from, pos.optimizer, optim_name);
    if (!pos.rng_state.empty()) gen.set_state(pos.rng_state);
    pos.config_yaml = config_yaml;
    log::info("resumed from {}: epoch {}, batch {}, step {}", resume_from,
              pos.epoch + 1, pos.batch_in_epoch, pos.step);
  }
  MetricsWriter metrics = log::is_main_process()
                              ? MetricsWriter((out_dir / "metrics.jsonl").string(), !resume_from.empty())
                              : MetricsWriter();

  // After loading: DDP broadcasts rank 0's weights and buffers to every replica.
  std::unique_ptr<dist::DistributedDataParallel> ddp = make_ddp(c, dc, model, device);

  TrainStep step(c, model, *optimizer, ddp.get(), device);
  if (step.scaler() && resumed_scale.first > 0) step.scaler()->load(resumed_scale.first, resumed_scale.second);
  // Built after any checkpoint was loaded: the graph captures the loaded tensors' addresses.
  std::unique_ptr<GraphedTrainStep> graphed;
  if (c.train.cuda_graph) {
    if (ddp && ddp->comm().name().find("gloo") != std::string::npos)
      throw UsageError(fmt::format("train.cuda_graph=true cannot capture DDP over {} (host code; chosen because ranks "
                                   "share a GPU); set it false", ddp->comm().name()));
    graphed = std::make_unique<GraphedTrainStep>(step, *optimizer, ddp ? &ddp->comm() : nullptr, compute);
    log::info("train: the step is captured as a CUDA graph after {} eager steps", GraphedTrainStep::kEagerSteps);
  }
  // Batches from the loader through pinned memory, or built on the GPU from a resident copy.
  std::unique_ptr<BatchSource> source;
  if (c.data.gpu_resident) {
    source = std::make_unique<ResidentFeeder>(*train_set, sampler, lo, device, compute);
    log::info("data: training set resident on {}, batches built there", device.str());
  } else {
    source = std::make_unique<DeviceFeeder>(loader, device, compute);
  }
  BatchSource& batches = *source;

  TrainResult result;
  auto write_checkpoint = [&](const std::string& name) {
    pos.rng_state = gen.state();
    if (step.scaler()) {
      pos.loss_scale = step.scaler()->scale();
      pos.loss_scale_growth_tracker = step.scaler()->growth_tracker();
    }
    const std::string path = (ckpt_dir / name).string();
    if (log::is_main_process()) {
      nn::save_checkpoint(path, model, *optimizer, pos);
      log::info("checkpoint: {}", path);
    }
    dc.barrier();  // no rank runs ahead (or reads it) before it is complete
    result.checkpoint = path;
  };

  model.train();
  bool stop = pos.step >= total_steps;
  while (!stop && pos.epoch < c.train.epochs) {
    batches.start_epoch(pos.epoch, pos.batch_in_epoch);
    ProgressBar bar(log::is_main_process() && ProgressBar::stdout_is_terminal(),
                    fmt::format("epoch {}/{}", pos.epoch + 1, c.train.epochs), batches_per_epoch);
    WindowStats window;
    double last_loss = 0;
    int64_t micro = 0;
    auto window_start = Clock::now();
    while (auto batch = batches.next()) {
      // The last micro-batch of an accumulation group communicates; the others only accumulate.
      const bool sync = micro + 1 == accum || pos.batch_in_epoch + 1 == batches_per_epoch;
      Tensor loss, hits;
      if (graphed) {  // one whole step (grad_accum_steps is 1), replayed
        StepOutputs out = graphed->run(*batch, schedule.lr_at(pos.step));
        loss = out.loss;
        hits = out.hits;
      } else {
        loss = step.forward(*batch, sync, &hits);
        step.backward(loss);
        step.finish_gradient_sync();
      }
      window.add(loss, hits, batch->size);
      ++pos.batch_in_epoch;
      if (++micro < accum && pos.batch_in_epoch < batches_per_epoch) continue;
      micro = 0;
      const double lr = schedule.lr_at(pos.step);
      if (!graphed) step.optimizer_step(lr);
      ++pos.step;
      bar.update(pos.batch_in_epoch, fmt::format("loss {:.4f} lr {:.4g}", last_loss, lr));
      if (pos.step % c.train.log_interval == 0 || pos.batch_in_epoch == batches_per_epoch) {
        const WindowSums w = window.flush(pos.step);
        std::vector<double> sums{w.loss_sum, w.correct, w.images};  // over all ranks
        dc.all_reduce_sum(sums);
        const double ips = sums[2] / std::max(seconds_since(window_start), 1e-9);
        const double mean_loss = sums[0] / sums[2], accuracy = sums[1] / sums[2];
        last_loss = mean_loss;
        nlohmann::json rec{{"kind", "train"}, {"epoch", pos.epoch + 1}, {"step", pos.step},
                           {"loss", mean_loss}, {"accuracy", accuracy}, {"lr", lr}, {"images_per_s", ips}};
        if (step.scaler()) rec["loss_scale"] = step.scaler()->scale();
        metrics.write(rec);
        if (!bar.enabled())
          log::info("epoch {} step {} loss {:.4f} acc {:.4f} lr {:.4g} {:.1f} img/s", pos.epoch + 1, pos.step,
                    mean_loss, accuracy, lr, ips);
        window_start = Clock::now();
      }
      if (pos.step >= total_steps) stop = true;
      if (dc.any_rank(g_stop_signal.load() != 0)) {  // every rank stops at the same step
        result.interrupted = stop = true;
        log::warn("stop requested (signal {}): checkpointing at step {} and stopping", g_stop_signal.load(),
                  pos.step);
      }
      if (stop) break;
    }
    bar.finish();
    if (device.is_cuda()) {
      const AllocatorStats m = allocator_for(device).stats();
      log::info("{} memory: {:.1f} MiB in use, peak {:.1f} MiB, {} cudaMalloc calls so far", device.str(),
                double(m.in_use_bytes) / (1 << 20), double(m.peak_in_use_bytes) / (1 << 20), m.backend_allocations);
      if (graphed && graphed->captured())
        log::info("CUDA graph of the step: {} replays, its pool reserves {:.1f} MiB", graphed->replays(),
                  double(graphed->pool_stats().reserved_bytes) / (1 << 20));
    }
    const bool epoch_done = pos.batch_in_epoch >= batches_per_epoch;
    if (epoch_done) {
      ++pos.epoch;
      pos.batch_in_epoch = 0;
    }
    if (result.interrupted) break;
    if (epoch_done || stop) {
      const EvalResult ev = evaluate(model, *test_set, c, dc, device);
      result.test_accuracy = ev.accuracy;
      result.test_loss = ev.loss;
      metrics.write({{"kind", "eval"}, {"epoch", epoch_done ? pos.epoch : pos.epoch + 1}, {"step", pos.step},
                     {"loss", ev.loss}, {"accuracy", ev.accuracy},
                     {"lr", schedule.lr_at(std::max<int64_t>(pos.step - 1, 0))},
                     {"images_per_s", ev.images_per_s}});
      log::info("eval after epoch {}: test loss {:.4f}, accuracy {:.2f}%", epoch_done ? pos.epoch : pos.epoch + 1,
                ev.loss, 100.0 * ev.accuracy);
      if (c.train.target_accuracy > 0 && ev.accuracy >= c.train.target_accuracy) {
        // Time to accuracy counts from process start: data loading and start-up included.
        const double seconds = seconds_since(process_start);
        metrics.write({{"kind", "event"}, {"event", "target_reached"}, {"target", c.train.target_accuracy}, {"accuracy", ev.accuracy},
                       {"epoch", pos.epoch}, {"step", pos.step}, {"seconds_since_start", seconds}});
        log::info("reached test accuracy {:.2f}% (target {:.2f}%) after {:.1f} s; stopping", 100.0 * ev.accuracy,
                  100.0 * c.train.target_accuracy, seconds);
        stop = true;
      }
    }
    if (epoch_done && c.checkpoint.save_every > 0 && pos.epoch % c.checkpoint.save_every == 0 && !stop &&
        pos.epoch < c.train.epochs)
      write_checkpoint(fmt::format("epoch_{}.safetensors", pos.epoch));
  }
  if (ddp) {
    ddp->before_forward();  // bring every rank's BatchNorm statistics to rank 0's, then compare
    dc.check_replicas_equal(state_fingerprint(model));
  }
  write_checkpoint("last.safetensors");
  result.steps = pos.step;
  if (c.profile.enabled) {
    const std::string path = (out_dir / fmt::format("trace_rank{}.json", dc.rank())).string();
    trace::write_chrome_trace(path, dc.rank());
    log::info("timeline: {} (open in https://ui.perfetto.dev)", path);
  }
  return result;
}

}  // namespace cg::apps
