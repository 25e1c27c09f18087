// The rendezvous store with many ranks (issue 26): a few hundred clients complete the trainer's
// rendezvous; a set wakes only the ranks waiting for its key; the listen backlog is the kernel's
// maximum; the descriptor limit is raised for the world size; and running out of descriptors is
// an error naming the limit, not a spin while ranks wait out their timeout. The descriptor tests
// lower RLIMIT_NOFILE in a forked child (this process keeps its own), with a bound on the wait.
#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "dist/tcp_store.h"
#include "dist/tcp_store_server.h"
#include "support/free_port.h"
#include "support/need_tool.h"
#include "support/processes.h"
#include "util/check.h"

namespace cg::dist {
namespace {

using Clock = std::chrono::steady_clock;

TcpStoreOptions options(int port, bool server, int timeout_ms, int world = 0) {
  TcpStoreOptions o;
  o.port = port;
  o.is_server = server;
  o.timeout = std::chrono::milliseconds(timeout_ms);
  o.expected_clients = world;
  return o;
}

// What train/distributed.cpp does with the store: join, compare binary and config, barrier.
void rendezvous(TcpStore& store, int rank, int world) {
  const std::string r = std::to_string(rank);
  store.set("gloo/" + r, std::vector<char>(136 * size_t(world - 1), 'a'));
  store.set("binary/" + r, std::string("crc32 1badb002, 1000 bytes"));
  CG_CHECK(store.get_string("binary/0") == "crc32 1badb002, 1000 bytes", "binary/0 differs");
  store.set("config/" + r, std::string(3000, 'c'));
  CG_CHECK(store.get_string("config/0") == std::string(3000, 'c'), "config/0 differs");
  store.barrier("init", world);
}

// Ranks 1..world-1 as threads, each with its own client; returns how many failed.
int run_client_ranks(int port, int world, int timeout_ms, std::vector<std::string>* errors = nullptr) {
  std::atomic<int> failed{0};
  std::mutex mutex;
  std::vector<std::thread> ranks;
  for (int r = 1; r < world; ++r)
    ranks.emplace_back([&, r] {
      try {
        TcpStore client(options(port, false, timeout_ms));
        rendezvous(client, r, world);
      } catch (const Error& e) {
        ++failed;
        std::lock_guard<std::mutex> lock(mutex);
        if (errors) errors->push_back(e.what());
      }
    });
  for (auto& t : ranks) t.join();
  return failed;
}

TEST(TcpStoreScale, TwoHundredFiftySixRanksCompleteTheRendezvous) {
  const int port = test::free_port(), world = 256;
  auto done = std::async(std::launch::async, [&] {
    TcpStore server(options(port, true, 60000, world));
    std::thread others([&] { EXPECT_EQ(run_client_ranks(port, world, 60000), 0); });
    rendezvous(server, 0, world);
    others.join();
  });
  // Correctness, not timing: the bound is far above the fraction of a second it takes.
  ASSERT_EQ(done.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "the rendezvous hung";
  done.get();
}

// A set wakes only the gets waiting for its key: with one condition variable notified on every
// set, 64 ranks each waiting for its own key woke about 64 * 65 / 2 times.
TEST(TcpStoreScale, ASetWakesOnlyTheRanksWaitingForItsKey) {
  const int port = test::free_port(), ranks = 64;
  TcpStoreServer server(port, ranks);
  std::vector<std::thread> waiting;
  for (int r = 0; r < ranks; ++r)
    waiting.emplace_back([port, r] {
      TcpStore client(options(port, false, 30000));
      EXPECT_EQ(client.get_string("key/" + std::to_string(r)), "v");
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let the gets reach the server
  TcpStore setter(options(port, false, 30000));
  for (int r = 0; r < ranks; ++r) setter.set("key/" + std::to_string(r), std::string("v"));
  for (auto& t : waiting) t.join();
  EXPECT_LE(server.wakeups(), 2 * ranks);
}

// The listen backlog is the kernel's maximum (`ss` shows a listening socket's backlog as its
// Send-Q): with 128, a thousand ranks connecting at once overflowed the accept queue.
TEST(TcpStoreScale, ListensWithTheKernelsMaximumBacklog) {
  NEED_TOOL(test::missing_command("ss", "iproute2"));
  const int port = test::free_port();
  TcpStoreServer server(port, 0);
  const std::string command = "ss -ltnH 'sport = :" + std::to_string(port) + "' 2>/dev/null";
  FILE* out = ::popen(command.c_str(), "r");
  char line[512] = {};
  const bool got = out && std::fgets(line, sizeof(line), out);
  if (out) ::pclose(out);
  ASSERT_TRUE(got) << "ss shows no socket listening on port " << port;
  long kernel_max = 0;  // listen() caps the backlog at net.core.somaxconn
  if (FILE* f = std::fopen("/proc/sys/net/core/somaxconn", "r")) {
    if (std::fscanf(f, "%ld", &kernel_max) != 1) kernel_max = 0;
    std::fclose(f);
  }
  const long expected = std::min<long>(SOMAXCONN, kernel_max);
  if (expected <= 128) GTEST_SKIP() << "the kernel caps the backlog at " << kernel_max << ": 128 would pass too";
  char state[32];
  long recv_q = 0, send_q = 0;
  ASSERT_EQ(std::sscanf(line, "%31s %ld %ld", state, &recv_q, &send_q), 3) << line;
  EXPECT_EQ(send_q, expected) << line;
}

// A forked child running `body` with its result (a line) on a pipe; the parent waits for it with
// a bound, so a hang in the child fails the test instead of hanging it. The child reports with
// report(line), which then blocks until the parent releases it (end_child), so that what the
// body holds (a store) lives on meanwhile; a body that returns reports what it returns.
// The child's standard error goes to a file, so that a sanitizer report in it fails the test even
// when the report's thread stalls (its stack trace wants descriptors too) and the child exits 0.
struct Child {
  pid_t pid = -1;
  int result = -1;   // the child's line
  int release = -1;  // the child exits once the parent closes this
  std::string stderr_path;
};
using Report = std::function<void(const std::string&)>;

Child fork_child(const std::function<std::string(const Report&)>& body) {
  int result[2], release[2];
  CG_CHECK(::pipe(result) == 0 && ::pipe(release) == 0, "pipe failed");
  char stderr_path[] = "/tmp/tcp_store_scale_child_XXXXXX";
  const int stderr_fd = ::mkstemp(stderr_path);
  CG_CHECK(stderr_fd >= 0, "mkstemp failed");
  const pid_t pid = ::fork();
  CG_CHECK(pid >= 0, "fork failed");
  if (pid == 0) {
    ::dup2(stderr_fd, 2);
    ::close(stderr_fd);
    ::close(result[0]);
    ::close(release[1]);
    const Report report = [&](const std::string& line) {
      if (::write(result[1], line.data(), line.size()) < 0) ::_exit(1);  // the parent then sees no line
      ::close(result[1]);
      char byte;
      while (::read(release[0], &byte, 1) > 0) {
      }
      ::_exit(0);
    };
    try {
      report(body(report));
    } catch (const std::exception& e) {
      report(std::string("threw: ") + e.what());
    }
  }
  ::close(stderr_fd);
  ::close(result[1]);
  ::close(release[0]);
  return {pid, result[0], release[1], stderr_path};
}

// The child's line, or "" when none came within `bound` (the child is then killed).
std::string child_line(Child& child, std::chrono::seconds bound) {
  std::string line;
  const auto deadline = Clock::now() + bound;
  while (Clock::now() < deadline) {
    pollfd p{child.result, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(child.result, buf, sizeof(buf));
    if (n <= 0) break;
    line.append(buf, size_t(n));
  }
  if (Clock::now() >= deadline) ::kill(child.pid, SIGKILL);
  return line;
}

// Lets the child exit, passes on what it printed, and fails the test when that holds a sanitizer
// report or the child exited with the sanitizers' code.
void end_child(Child& child) {
  ::close(child.release);
  ::close(child.result);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  const std::string output = test::read_text(child.stderr_path);
  std::remove(child.stderr_path.c_str());
  std::fputs(output.c_str(), stderr);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  test::expect_no_sanitizer_report(code, output, "the store's process");
}

void set_nofile(rlim_t soft, rlim_t hard) {
  rlimit lim{soft, hard};
  CG_CHECK(::setrlimit(RLIMIT_NOFILE, &lim) == 0, "setrlimit failed");
}

// How many more descriptors this process could open now.
int free_descriptors() {
  std::vector<int> held;
  for (int fd; (fd = ::dup(0)) >= 0;) held.push_back(fd);
  for (int fd : held) ::close(fd);
  return int(held.size());
}

rlimit nofile() {
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  return lim;
}

// A stock soft limit (often 1024) below the world size: the store raises it to the hard limit,
// so all ranks join (here 200 ranks, all in a child whose soft limit is 64: each needs two
// descriptors there, its client's and the store's end).
TEST(TcpStoreScale, TheStoreRaisesTheSoftDescriptorLimitToTheHardOne) {
  const int port = test::free_port(), world = 200;
  if (nofile().rlim_max != RLIM_INFINITY && nofile().rlim_max < 2 * world + 64)
    GTEST_SKIP() << "needs a hard RLIMIT_NOFILE of at least " << 2 * world + 64 << " (ulimit -Hn)";
  Child child = fork_child([&](const Report&) {
    set_nofile(64, nofile().rlim_max);
    TcpStore server(options(port, true, 10000, world));
    int failed = 0;
    std::vector<std::string> errors;
    std::thread others([&] { failed = run_client_ranks(port, world, 10000, &errors); });
    std::string rank0;
    try {
      rendezvous(server, 0, world);
    } catch (const Error& e) {
      rank0 = e.what();
    }
    others.join();
    if (!rank0.empty()) return "rank 0 failed: " + rank0;
    return failed == 0 ? std::string("joined") : std::to_string(failed) + " ranks failed: " + errors.front();
  });
  const std::string line = child_line(child, std::chrono::seconds(60));
  end_child(child);
  EXPECT_EQ(line, "joined");
}

// A hard limit below the world size: the store cannot take every rank. Rank 0 gets an error
// naming RLIMIT_NOFILE at once, and the other ranks lose their connection at once, instead of
// the accept loop spinning on EMFILE while everybody waits out the timeout.
TEST(TcpStoreScale, OutOfDescriptorsIsAnErrorNamingTheLimitNotAHang) {
  const int port = test::free_port(), world = 101;
  Child child = fork_child([&](const Report& report) {
    set_nofile(48, 48);
    TcpStore server(options(port, true, 30000, world));
    try {
      server.barrier("init", world);
    } catch (const Error& e) {
      // The store stays up meanwhile, as it does until rank 0's process exits.
      report(fmt::format("{} | free descriptors: {}", e.what(), free_descriptors()));
    }
    return std::string("the barrier passed");
  });
  const auto start = Clock::now();
  std::vector<std::string> errors;
  std::thread others([&] { run_client_ranks(port, world, 30000, &errors); });
  const std::string line = child_line(child, std::chrono::seconds(15));
  EXPECT_NE(line.find("out of file descriptors"), std::string::npos) << line;
  EXPECT_NE(line.find("RLIMIT_NOFILE is 48"), std::string::npos) << line;
  // By the time rank 0 sees the error, the store has closed the connections it held, so rank 0
  // can act on it (open a log, write a checkpoint); one descriptor may be a late rank's
  // connection, accepted and closed again at once.
  int open_connections = -1, free = -1;
  std::sscanf(line.c_str() + std::min(line.size(), line.find(" with ")), " with %d connections", &open_connections);
  std::sscanf(line.c_str() + std::min(line.size(), line.find("| free descriptors:")), "| free descriptors: %d", &free);
  EXPECT_GT(open_connections, 0) << line;
  EXPECT_GE(free, open_connections - 1) << line;
  others.join();  // before the child exits: a store that is gone would make late ranks retry
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(15)) << "ranks waited for their timeout";
  EXPECT_EQ(errors.size(), size_t(world - 1));
  end_child(child);
}

}  // namespace
}  // namespace cg::dist
