// The collective watchdog without NCCL: completion in issue order, numbered operation names, a
// never-finishing collective turned into an error naming rank and operation within the timeout
// (the communicator aborted once, every waiter woken), and an asynchronous transport error.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <vector>

#include "dist/watchdog.h"
#include "support/messages.h"
#include "util/check.h"

namespace cg::dist {
namespace {

using Clock = CollectiveWatchdog::Clock;

std::string error_of(Work& work) {
  try {
    work.wait();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CollectiveWatchdog, CompletesInIssueOrderWithNumberedNames) {
  std::vector<std::string> completed;
  CollectiveWatchdog::Options o;
  o.background_thread = false;
  o.on_complete = [&](const std::string& name, Work&) { completed.push_back(name); };
  CollectiveWatchdog dog(o);
  bool first_done = false, second_done = false;
  auto a = std::make_shared<Work>(), b = std::make_shared<Work>(), c = std::make_shared<Work>();
  EXPECT_EQ(dog.watch(a, "all_reduce", "bucket 0, 4.0 MB", [&] { return first_done; }),
            "all_reduce #1 (bucket 0, 4.0 MB)");
  EXPECT_EQ(dog.watch(b, "broadcast", "", [&] { return second_done; }), "broadcast #1");
  EXPECT_EQ(dog.watch(c, "all_reduce", "bucket 1", [] { return true; }), "all_reduce #2 (bucket 1)");
  second_done = true;  // a later one done first: it waits for the stream order
  dog.poll();
  EXPECT_FALSE(a->done());
  EXPECT_FALSE(b->done());
  EXPECT_EQ(dog.outstanding(), 3u);
  first_done = true;
  dog.poll();
  EXPECT_TRUE(a->done() && b->done() && c->done());
  EXPECT_EQ(completed, (std::vector<std::string>{"all_reduce #1 (bucket 0, 4.0 MB)", "broadcast #1",
                                                 "all_reduce #2 (bucket 1)"}));
  EXPECT_FALSE(dog.failed());
  EXPECT_NO_THROW(dog.check_health());
}

TEST(CollectiveWatchdog, StuckCollectiveFailsNamingRankAndOperationWithinTheTimeout) {
  std::atomic<int> aborts{0};
  CollectiveWatchdog::Options o;
  o.rank = 1;
  o.timeout_s = 0.2;
  o.abort = [&] { ++aborts; };
  CollectiveWatchdog dog(o);
  auto finished = std::make_shared<Work>(), stuck = std::make_shared<Work>(), behind = std::make_shared<Work>();
  dog.watch(finished, "all_reduce", "bucket 0, 1.0 MB", [] { return true; });
  const auto start = Clock::now();
  dog.watch(stuck, "all_reduce", "bucket 1, 4.0 MB", [] { return false; });  // never finishes
  dog.watch(behind, "broadcast", "", [] { return true; });
  const std::string message = error_of(*stuck);  // must not hang
  const double waited_s = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_GE(waited_s, 0.2);
  EXPECT_LT(waited_s, 5.0);
  test::expect_mentions(message, {"rank 1", "all_reduce #2 (bucket 1, 4.0 MB)", "timed out after 0.2 s",
                                  "dist.timeout_s", "aborted"});
  EXPECT_EQ(error_of(*finished), "");
  EXPECT_EQ(error_of(*behind), message);  // queued behind the stuck one on the stream: failed too
  EXPECT_EQ(aborts.load(), 1);
  EXPECT_TRUE(dog.failed());
  EXPECT_THROW(dog.check_health(), Error);
  auto later = std::make_shared<Work>();  // issued after the failure: fails at once
  dog.watch(later, "all_reduce", "", [] { return true; });
  EXPECT_EQ(error_of(*later), message);
  EXPECT_EQ(aborts.load(), 1);
}

TEST(CollectiveWatchdog, HandDrivenClockDecidesTheTimeout) {
  CollectiveWatchdog::Options o;
  o.timeout_s = 30;
  o.background_thread = false;
  CollectiveWatchdog dog(o);
  auto w = std::make_shared<Work>();
  dog.watch(w, "all_reduce", "", [] { return false; });
  dog.poll(Clock::now() + std::chrono::seconds(29));
  EXPECT_FALSE(dog.failed());
  dog.poll(Clock::now() + std::chrono::seconds(31));
  EXPECT_TRUE(dog.failed());
  test::expect_mentions(error_of(*w), {"rank 0", "all_reduce #1", "timed out after 30 s"});
}

TEST(CollectiveWatchdog, AsynchronousTransportErrorFailsTheOldestCollective) {
  std::string transport_error;
  bool aborted = false;
  CollectiveWatchdog::Options o;
  o.rank = 3;
  o.background_thread = false;
  o.async_error = [&] { return transport_error; };
  o.abort = [&] { aborted = true; };
  CollectiveWatchdog dog(o);
  auto w = std::make_shared<Work>();
  dog.watch(w, "all_reduce", "bucket 2, 0.5 MB", [] { return false; });
  dog.poll();
  EXPECT_FALSE(dog.failed());
  transport_error = "remote process exited or there was a network error";
  dog.poll();
  EXPECT_TRUE(aborted);
  test::expect_mentions(error_of(*w), {"rank 3", "all_reduce #1 (bucket 2, 0.5 MB) failed", "network error"});
}

TEST(CollectiveWatchdog, NoTimeoutMeansNone) {
  CollectiveWatchdog::Options o;
  o.background_thread = false;
  CollectiveWatchdog dog(o);
  auto w = std::make_shared<Work>();
  dog.watch(w, "all_reduce", "", [] { return false; });
  dog.poll(Clock::now() + std::chrono::hours(24));
  EXPECT_FALSE(dog.failed());
}

}  // namespace
}  // namespace cg::dist
