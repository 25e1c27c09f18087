#include "dist/comm_stream.h"

#include "engine/runtime.h"
#include "util/check.h"
#include "util/trace.h"

namespace cg::dist {

CommStream::CommStream(Device device, CollectiveWatchdog::Options watchdog)
    : device_(device), stream_(Stream::create(device, -1)) {
  CG_CHECK(device.is_cuda(), "a communication stream needs a CUDA device, not {}", device.str());
  if (trace::enabled()) clock_ = std::make_unique<DeviceClock>(device);
  watchdog.on_thread_start = [d = device] { runtime::set_device(d); };
  watchdog.on_complete = [this](const std::string& name, Work& work) { on_complete(name, work); };
  watchdog_ = std::make_unique<CollectiveWatchdog>(std::move(watchdog));
}

CommStream::~CommStream() { watchdog_.reset(); }

std::shared_ptr<Work> CommStream::begin(const Stream& compute) {
  watchdog_->check_health();
  auto work = std::make_shared<Work>();
  Event ready = Event::create(device_);
  ready.record(compute);
  ready.wait(stream_);
  work->started = trace::Clock::now();  // before the start event: DeviceClock relies on it
  if (clock_ && trace::enabled()) {
    work->device_started = Event::create(device_, {.timing = true});
    work->device_started.record(stream_);
  }
  return work;
}

std::string CommStream::end(const std::shared_ptr<Work>& work, const std::string& op, const std::string& detail) {
  work->device_done = Event::create(device_, {.timing = work->device_started.defined()});
  work->device_done.record(stream_);
  // An event recorded during a capture cannot be polled (cudaErrorCapturedEvent), and the
  // collective runs only when the graph is replayed: watch_replay() covers it then.
  if (runtime::is_capturing(stream_)) return op + " (captured in a CUDA graph)";
  Event done = work->device_done;
  return watchdog_->watch(work, op, detail, [done] { return done.done(); });
}

void CommStream::watch_replay(const Stream& compute, const std::string& what) {
  watchdog_->check_health();
  auto work = std::make_shared<Work>();
  work->started = trace::Clock::now();
  work->device_done = Event::create(device_);
  work->device_done.record(compute);
  Event done = work->device_done;
  watchdog_->watch(work, "graph_replay", what, [done] { return done.done(); });
}

void CommStream::check_health() const { watchdog_->check_health(); }

void CommStream::wait(const Work& work, const Stream& compute) const {
  watchdog_->check_health();
  work.device_done.wait(compute);
}

// On the watchdog's thread, in issue order.
void CommStream::on_complete(const std::string& name, Work& work) {
  if (!trace::enabled()) return;
  trace::Clock::time_point start = work.started, end = work.finished;  // host view: issue to observed
  if (clock_ && work.device_started.defined()) {
    try {  // a timeline problem must not fail the collective: keep the host view then
      clock_->refresh();
      trace::Clock::time_point s, e;
      if (clock_->to_host(work.device_started, work.started, s) && clock_->to_host(work.device_done, work.started, e)) {
        start = s;
        end = e;
      }
    } catch (const std::exception&) {
    }
  }
  trace::record(name, "communication stream", start, end);
}

}  // namespace cg::dist
