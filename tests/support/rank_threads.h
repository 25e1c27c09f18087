// Ranks as threads of the test process: each thread has its own rendezvous-store client (rank 0
// serves it) and its own Gloo process group over real TCP connections, so collectives are the
// real ones while one process holds every rank's results for comparison.
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "dist/process_group.h"
#include "dist/tcp_store.h"
#include "support/free_port.h"

namespace cg::test {

struct RankThreadOptions {
  // The store's and the process group's limit: a rank that stalls fails the test this late.
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
  // ProcessGroupOptions::artificial_delay (every collective sleeps this long first), per rank:
  // entry r for rank r; ranks past the end get comm_delay.back(), none when it is empty.
  std::vector<std::chrono::milliseconds> comm_delay;
};

// Runs body(rank, store, group) on `world` threads and joins them. A rank's exception becomes a
// test failure naming the rank (the others then fail on their own, by the timeout at the latest).
// After the body, every rank meets the others at a barrier, which keeps rank 0's store up until
// all are done. The store is the rank's client, for subgroups of its own (hybrid_shard's).
inline void run_rank_threads(int world,
                             const std::function<void(int, dist::TcpStore&, dist::ProcessGroup&)>& body,
                             const RankThreadOptions& options = {}) {
  const int port = free_port();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        dist::TcpStoreOptions so;
        so.port = port;
        so.is_server = r == 0;
        so.timeout = options.timeout;
        dist::TcpStore store(so);
        dist::ProcessGroupOptions po;
        po.timeout = options.timeout;
        if (!options.comm_delay.empty())
          po.artificial_delay = options.comm_delay[std::min(size_t(r), options.comm_delay.size() - 1)];
        dist::ProcessGroup group(store, r, world, "127.0.0.1", po);
        body(r, store, group);
        group.barrier();
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
}

// The same for bodies that need no store.
inline void run_rank_threads(int world, const std::function<void(int, dist::ProcessGroup&)>& body,
                             const RankThreadOptions& options = {}) {
  run_rank_threads(world, [&](int r, dist::TcpStore&, dist::ProcessGroup& group) { body(r, group); }, options);
}

}  // namespace cg::test
