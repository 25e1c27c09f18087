// The rendezvous store at scale (issue 26): rank 0 hosts the TcpStore and N-1 ranks, each a
// process forked from this one (as each rank of a job is a process), run the trainer's own store
// workload on loopback:
//   join:   connect a TcpStore client, set gloo/<rank> (ProcessGroup's transport addresses: one
//           Gloo TCP address, 136 bytes, per other rank, as dist/gloo_mesh.cpp publishes them);
//   config: set binary/<rank> and config/<rank> (a few KB of YAML), get binary/0 and config/0
//           (DistContext::check_same_config);
//   barrier: TcpStore::barrier.
// Gloo's full mesh (N^2 connections) is left out: this measures the store only.
// Usage: store_rendezvous_bench <ranks> [nofile_soft_limit] [config_bytes]
// Prints one line: the time from releasing the ranks to the last one finishing, the store
// process's peak file descriptors and threads (sampled every 2 ms), its RSS before the store and
// VmHWM after, how many ranks failed, and the ranks' CPU time (the client side's cost). A
// nofile_soft_limit lowers this process's soft RLIMIT_NOFILE first (a stock `ulimit -n 1024`).
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "dist/tcp_store.h"
#include "util/check.h"

namespace {

using namespace cg;
using Clock = std::chrono::steady_clock;

constexpr size_t kGlooAddressBytes = 136;  // sizeof gloo::transport::tcp::Address's sockaddr_storage + seq
constexpr std::chrono::seconds kTimeout{60};

struct Payload {
  std::vector<char> addresses;  // gloo/<rank>
  std::string binary;           // binary/<rank>
  std::string config;           // config/<rank>
};

Payload make_payload(int world, size_t config_bytes) {
  Payload p;
  p.addresses.assign(kGlooAddressBytes * size_t(world - 1), 'a');
  p.binary = "crc32 1badb002, 48211968 bytes";
  while (p.config.size() < config_bytes) p.config += "model:\n  name: resnet18\n  width: 64\n";
  p.config.resize(config_bytes);
  return p;
}

// What every rank does with the store before training starts (train/distributed.cpp).
void rank_workload(dist::TcpStore& store, int rank, int world, const Payload& p) {
  const std::string r = std::to_string(rank);
  store.set("gloo/" + r, p.addresses);
  store.set("binary/" + r, p.binary);
  CG_CHECK(store.get_string("binary/0") == p.binary, "rank {}: binary/0 differs", rank);
  store.set("config/" + r, p.config);
  CG_CHECK(store.get_string("config/0") == p.config, "rank {}: config/0 differs", rank);
  store.barrier("init", world);
}

dist::TcpStoreOptions options(int port, bool server, int world) {
  dist::TcpStoreOptions o;
  o.port = port;
  o.is_server = server;
  o.timeout = kTimeout;
  o.expected_clients = world;
  return o;
}

// A child rank: waits for the go (its end of the pipe closing), runs the workload, exits 0 or 1.
[[noreturn]] void run_child(int go_fd, int port, int rank, int world, const Payload& p) {
  char byte;
  while (::read(go_fd, &byte, 1) < 0 && errno == EINTR) {
  }
  ::close(go_fd);
  try {
    dist::TcpStore store(options(port, false, world));
    rank_workload(store, rank, world, p);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d failed: %s\n", rank, e.what());
    std::fflush(stderr);
    ::_exit(1);
  }
  ::_exit(0);
}

int count_fds() {
  DIR* d = ::opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (::readdir(d)) ++n;
  ::closedir(d);
  return n - 3;  // ".", ".." and the directory's own descriptor
}

long status_kb(const std::string& field) {  // a "VmRSS:"-style line of /proc/self/status
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + field.size());
  return -1;
}

// Samples the peak descriptors and threads of this process (the store's) until stopped.
struct Sampler {
  std::atomic<bool> stop{false};
  int peak_fds = 0;
  long peak_threads = 0;
  std::thread thread{[this] {
    while (!stop) {
      peak_fds = std::max(peak_fds, count_fds());
      peak_threads = std::max(peak_threads, status_kb("Threads:"));
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }};
  void finish() {
    stop = true;
    thread.join();
  }
};

int free_port() {  // the same trick as tests/support/free_port.h
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

void lower_nofile(long soft) {
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = rlim_t(soft);
  CG_CHECK(::setrlimit(RLIMIT_NOFILE, &lim) == 0, "setrlimit(RLIMIT_NOFILE, {}) failed", soft);
}

// Forks ranks 1..world-1, each blocked on the go pipe; returns their pids.
std::vector<pid_t> fork_ranks(int world, int port, const Payload& p, int go[2]) {
  std::vector<pid_t> pids;
  for (int rank = 1; rank < world; ++rank) {
    const pid_t pid = ::fork();
    CG_CHECK(pid >= 0, "fork failed at rank {}: {}", rank, std::strerror(errno));
    if (pid == 0) {
      ::close(go[1]);
      run_child(go[0], port, rank, world, p);
    }
    pids.push_back(pid);
  }
  ::close(go[0]);
  return pids;
}

int wait_ranks(const std::vector<pid_t>& pids) {
  int failures = 0;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: store_rendezvous_bench <ranks> [nofile_soft_limit] [config_bytes]\n");
    return 2;
  }
  const int world = std::atoi(argv[1]);
  if (argc > 2 && std::atol(argv[2]) > 0) lower_nofile(std::atol(argv[2]));
  const size_t config_bytes = argc > 3 ? size_t(std::atol(argv[3])) : 4096;
  const Payload payload = make_payload(world, config_bytes);
  const int port = free_port();
  int go[2];
  CG_CHECK(::pipe(go) == 0, "pipe failed");
  const std::vector<pid_t> pids = fork_ranks(world, port, payload, go);  // before any thread starts
  const long rss_before = status_kb("VmRSS:");
  Sampler sampler;
  int failures = 0;
  const auto t0 = Clock::now();
  try {
    dist::TcpStore store(options(port, true, world));  // rank 0 hosts the store
    ::close(go[1]);                                     // go
    rank_workload(store, 0, world, payload);
    failures = wait_ranks(pids);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank 0 failed: %s\n", e.what());
    ::close(go[1]);
    failures = 1 + wait_ranks(pids);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  sampler.finish();
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  rusage ranks{};  // the forked ranks' CPU time, so that the client side's cost shows next to PyTorch's
  ::getrusage(RUSAGE_CHILDREN, &ranks);
  const double ranks_cpu = double(ranks.ru_utime.tv_sec + ranks.ru_stime.tv_sec) +
                           double(ranks.ru_utime.tv_usec + ranks.ru_stime.tv_usec) * 1e-6;
  std::printf("cudagrad ranks=%d time_s=%.3f peak_fds=%d peak_threads=%ld rss_before_mb=%.1f vmhwm_mb=%.1f "
              "failures=%d ranks_cpu_s=%.2f nofile_soft_at_end=%ld\n",
              world, seconds, sampler.peak_fds, sampler.peak_threads, double(rss_before) / 1024,
              double(status_kb("VmHWM:")) / 1024, failures, ranks_cpu, long(lim.rlim_cur));
  return failures == 0 ? 0 : 1;
}
