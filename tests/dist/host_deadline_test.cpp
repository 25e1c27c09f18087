// dist/host_deadline.h: a scope that finishes in time runs nothing; one that outlives its deadline
// runs the expiry while the scope is still stuck; no deadline (0 s) never fires; and
// exit_naming_cause ends the process with status 1 and the cause on stderr, which is what a rank
// stuck in NCCL's communicator setup does (dist/nccl_comm.cpp).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "dist/host_deadline.h"

namespace cg::dist {
namespace {

using namespace std::chrono_literals;

TEST(HostDeadline, AScopeFinishingInTimeRunsNothing) {
  std::atomic<bool> fired{false};
  { HostDeadline deadline(30.0, [&] { fired = true; }); }
  EXPECT_FALSE(fired);
}

TEST(HostDeadline, ExpiryRunsWhileTheScopeIsStillStuck) {
  std::mutex mutex;
  std::condition_variable released;
  bool fired = false;
  {
    HostDeadline deadline(0.05, [&] {
      std::lock_guard<std::mutex> lock(mutex);
      fired = true;
      released.notify_one();
    });
    // The "stuck call": only the expiry lets it go (the wait gives up after a minute, failing).
    std::unique_lock<std::mutex> lock(mutex);
    EXPECT_TRUE(released.wait_for(lock, 60s, [&] { return fired; })) << "the deadline never fired";
  }
  EXPECT_TRUE(fired);
}

TEST(HostDeadline, NoDeadlineNeverFires) {
  std::atomic<bool> fired{false};
  {
    HostDeadline deadline(0.0, [&] { fired = true; });
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_FALSE(fired);
}

TEST(HostDeadlineDeathTest, EndsTheProcessNamingTheCause) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        HostDeadline deadline(0.05, [] { exit_naming_cause("rank 1: NCCL communicator setup did not finish"); });
        std::this_thread::sleep_for(60s);  // stuck: only the deadline ends this
      },
      ::testing::ExitedWithCode(1), "error: rank 1: NCCL communicator setup did not finish");
}

}  // namespace
}  // namespace cg::dist
