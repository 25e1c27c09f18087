// Places CUDA event timestamps on the host's steady clock, so collectives that ran on the
// communication stream appear on the Chrome-trace timeline (util/trace.h) at the times the device
// ran them, next to the host-side spans of forward and backward.
// An anchor is a timing event recorded on a private idle stream and waited for: its device time
// lies between the host times just before the record and just after the wait, so the midpoint is
// its host time to within half that gap (microseconds). An event recorded after an anchor's wait
// returned is later on the device too, so elapsed_ms(anchor, event) is positive; fresh anchors
// every few seconds keep that float small enough to stay precise over a long run.
// Not thread-safe: one thread (the watchdog's) converts; construction takes the first anchor.
#pragma once
#include <chrono>
#include <deque>

#include "engine/stream.h"
#include "util/trace.h"

namespace cg::dist {

class DeviceClock {
 public:
  explicit DeviceClock(Device device);
  // Takes a fresh anchor when the newest is older than `every`.
  void refresh(std::chrono::seconds every = std::chrono::seconds(5));
  // The host time of `event` (complete, created with timing) recorded on the host after
  // `recorded_after`; false when no anchor is known to precede it.
  bool to_host(const Event& event, trace::Clock::time_point recorded_after, trace::Clock::time_point& out) const;

 private:
  struct Anchor {
    Event event;
    trace::Clock::time_point host;        // the event's estimated host time
    trace::Clock::time_point wait_ended;  // events recorded after this are later on the device
  };
  void take_anchor();

  Device device_;
  Stream idle_;
  std::deque<Anchor> anchors_;  // oldest first; a few, so slightly older events still convert
};

}  // namespace cg::dist
