// cudagrad-launch: starts a data-parallel job on this node, like torchrun.
//   cudagrad-launch --nproc-per-node 2 build/apps/cudagrad-train --config configs/x.yaml
// The launcher's options come before the program (or before `--`); the program's arguments are
// passed through exactly, in order, never parsed here.
// Each process gets RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT;
// its output comes back line by line prefixed with its rank. SIGINT and SIGTERM are forwarded;
// ranks still running a grace period later are killed (SIGKILL), and a second Ctrl-C kills them at
// once, so that a rank stuck in a collective or ignoring signals never keeps the launcher waiting.
// Fail-fast: when a rank exits non-zero, the others get SIGTERM (SIGKILL after a grace period)
// and the launcher exits non-zero naming the first rank that failed. --max-restarts N restarts
// the group (CUDAGRAD_RESTART=n tells the trainer to resume from its latest checkpoint).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "apps/cli/cli.h"

namespace {

std::atomic<int> g_signal{0};
std::atomic<int> g_signal_count{0};  // SIGINT/SIGTERM received so far: the second one kills at once
extern "C" void on_signal(int sig) {
  g_signal = sig;
  ++g_signal_count;
}

struct Child {
  int rank = 0;
  pid_t pid = -1;
  int out_fd = -1;
  bool running = false;
  int status = 0;
};

std::mutex g_output;

// Copies one child's output to ours, a whole line at a time, with the rank in front.
void forward_output(int fd, int rank) {
  FILE* in = fdopen(fd, "r");
  char* line = nullptr;
  size_t cap = 0;
  while (getline(&line, &cap, in) > 0) {
    std::lock_guard<std::mutex> lock(g_output);
    std::fprintf(stdout, "[rank %d] %s", rank, line);
    if (line[std::strlen(line) - 1] != '\n') std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  std::free(line);
  std::fclose(in);
}

Child spawn(int rank, int local_rank, int local_world, int world, const std::string& addr, int port, int restart,
            const std::vector<std::string>& command) {
  int pipefd[2];
  if (pipe(pipefd) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);  // own process group: a stop reaches its threads and children too
    dup2(pipefd[1], STDOUT_FILENO);
    dup2(pipefd[1], STDERR_FILENO);
    close(pipefd[0]);
    close(pipefd[1]);
    setenv("RANK", std::to_string(rank).c_str(), 1);
    setenv("LOCAL_RANK", std::to_string(local_rank).c_str(), 1);
    setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
    setenv("LOCAL_WORLD_SIZE", std::to_string(local_world).c_str(), 1);
    setenv("MASTER_ADDR", addr.c_str(), 1);
    setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
    setenv("CUDAGRAD_RESTART", std::to_string(restart).c_str(), 1);
    setenv("CUDAGRAD_LAUNCHED", "1", 1);  // the launcher prefixes ranks; the program need not
    std::vector<char*> argv;
    for (const auto& a : command) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    std::fprintf(stderr, "cudagrad-launch: cannot run %s: %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  close(pipefd[1]);
  return Child{rank, pid, pipefd[0], true, 0};
}

// Why `program` cannot be started as execvp would look it up ("" when it can): caught before any
// rank is spawned, so a mistyped program is one command-line error instead of one per rank.
std::string why_not_runnable(const std::string& program) {
  auto check = [](const std::string& path) -> std::string {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return "no such file";
    if (S_ISDIR(st.st_mode)) return path + " is a directory";
    if (access(path.c_str(), X_OK) != 0) return path + " is not executable";
    return "";
  };
  if (program.find('/') != std::string::npos) return check(program);
  const char* path_env = std::getenv("PATH");
  std::string dirs = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  std::string first_refusal;
  for (size_t start = 0; start <= dirs.size();) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";  // an empty entry is the cwd
    const std::string why = check(dir + "/" + program);
    if (why.empty()) return "";
    if (first_refusal.empty() && why != "no such file") first_refusal = why;
    start = end + 1;
  }
  if (!first_refusal.empty()) return first_refusal;
  // Our own programs are not installed on PATH: point at where the build puts them.
  return program.rfind("cudagrad-", 0) == 0 ? "not found on PATH (give its path: build/apps/" + program + ")"
                                            : "not found on PATH";
}

std::string fmt_hex(uint32_t v) {
  char text[9];
  std::snprintf(text, sizeof(text), "%08x", v);
  return text;
}

// 128 random bits as hex: a token no other job has.
std::string random_job_token() {
  std::random_device device;
  std::string token;
  for (int i = 0; i < 4; ++i) token += fmt_hex(device());
  return token;
}

// The job token every rank says to the store first (train/distributed.cpp), in the environment the
// ranks inherit: --rdzv-id, else one already exported, else on one node a random one. One for all
// generations of the group, so restarted ranks rejoin, and none another job's ranks know.
void export_job_token(std::string job_id, int nnodes) {
  if (job_id.empty() && std::getenv("CUDAGRAD_JOB_TOKEN")) job_id = std::getenv("CUDAGRAD_JOB_TOKEN");
  if (job_id.empty() && nnodes == 1) job_id = random_job_token();
  if (!job_id.empty()) setenv("CUDAGRAD_JOB_TOKEN", job_id.c_str(), 1);
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  return "unknown status";
}

// One generation of ranks as the launcher watches them: which have exited, the first that failed,
// and the fail-fast stop of the others.
class Group {
 public:
  explicit Group(std::chrono::seconds grace) : grace_(grace) {}

  void start(int nproc, int node_rank, int nnodes, const std::string& addr, int port, int restart,
             const std::vector<std::string>& command) {
    const int world = nproc * nnodes;
    for (int i = 0; i < nproc; ++i) {
      children_.push_back(spawn(node_rank * nproc + i, i, nproc, world, addr, port, restart, command));
      readers_.emplace_back(forward_output, children_.back().out_fd, children_.back().rank);
    }
    alive_ = children_.size();
  }

  // Polls until every rank has exited, forwarding our signals and stopping the others when one fails.
  void watch() {
    while (alive_ > 0) {
      forward_signal();
      std::vector<Child*> exited = reap();
      note_failures(exited);
      if (!exited.empty()) continue;
      kill_lingering();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    for (auto& t : readers_) t.join();
  }

  // 0 when every rank exited with 0; else 1 naming the first that failed, or the exit code of a
  // rank that did not succeed (1 when a signal ended it).
  int exit_code() const {
    if (first_failed_ >= 0) {
      std::fprintf(stderr, "cudagrad-launch: rank %d failed first (%s); stopped the other ranks\n", first_failed_,
                   describe(failed_status_).c_str());
      return 1;
    }
    for (auto& c : children_)
      if (!(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0)) return WIFEXITED(c.status) ? WEXITSTATUS(c.status) : 1;
    return 0;
  }

 private:
  void signal_running(int sig) {
    for (auto& c : children_)
      if (c.running) kill(-c.pid, sig);
  }

  // SIGINT/SIGTERM, to every rank; then SIGKILL after the grace period, or at once on a second one.
  void forward_signal() {
    const int count = g_signal_count.load();
    if (count == signals_seen_) return;
    signals_seen_ = count;
    if (forwarded_ == 0) {
      forwarded_ = g_signal;
      signal_running(forwarded_);
      std::fprintf(stderr, "cudagrad-launch: sent %s to the ranks; any still running in %lld s are killed (press "
                   "Ctrl-C again to kill them now)\n", strsignal(forwarded_), (long long)grace_.count());
      if (!stopping_) {
        stopping_ = true;
        deadline_ = std::chrono::steady_clock::now() + grace_;
      }
      return;
    }
    std::fprintf(stderr, "cudagrad-launch: second signal: killing the ranks now\n");
    signal_running(SIGKILL);
    deadline_ = std::chrono::steady_clock::time_point::max();
  }

  // Reaps everything that has exited since the last look. When a rank dies, its peers fail a
  // moment later; among ranks reaped together, one killed by a signal is the likelier cause, so it
  // comes first.
  std::vector<Child*> reap() {
    std::vector<Child*> exited;
    int status = 0;
    for (pid_t pid; (pid = waitpid(-1, &status, WNOHANG)) > 0;) {
      for (auto& c : children_)
        if (c.pid == pid) {
          c.running = false;
          c.status = status;
          --alive_;
          exited.push_back(&c);
        }
    }
    std::stable_sort(exited.begin(), exited.end(),
                     [](const Child* a, const Child* b) { return WIFSIGNALED(a->status) > WIFSIGNALED(b->status); });
    return exited;
  }

  // Notes the first failure among `exited` (not after a forwarded signal: then the ranks were told
  // to stop) and fails fast: stops the others now, to be killed if they linger past the grace period.
  void note_failures(const std::vector<Child*>& exited) {
    for (const Child* c : exited) {
      const bool ok = WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0;
      if (ok || forwarded_) continue;
      if (first_failed_ < 0) {
        first_failed_ = c->rank;
        failed_status_ = c->status;
      }
      if (!stopping_) {
        stopping_ = true;
        deadline_ = std::chrono::steady_clock::now() + grace_;
        signal_running(SIGTERM);
      }
    }
  }

  void kill_lingering() {
    if (!stopping_ || std::chrono::steady_clock::now() <= deadline_) return;
    std::fprintf(stderr, "cudagrad-launch: ranks still running %lld s after being told to stop: killing them\n",
                 (long long)grace_.count());
    signal_running(SIGKILL);
    deadline_ = std::chrono::steady_clock::time_point::max();
  }

  std::chrono::seconds grace_;
  std::vector<Child> children_;
  std::vector<std::thread> readers_;
  size_t alive_ = 0;
  int first_failed_ = -1, failed_status_ = 0;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
  int forwarded_ = 0;     // the signal forwarded to the ranks, 0 before any
  int signals_seen_ = 0;  // g_signal_count when last looked at
};

// Runs one generation of the group; returns 0 or the launcher's exit code for a failure.
int run_group(int nproc, int node_rank, int nnodes, const std::string& addr, int port, int restart,
              const std::vector<std::string>& command, std::chrono::seconds grace) {
  Group group(grace);
  group.start(nproc, node_rank, nnodes, addr, port, restart, command);
  group.watch();
  return group.exit_code();
}

int free_port() {
  // Port 0 asks the kernel for a free one; --standalone uses it so jobs never collide.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// Where the launcher's own arguments end: at `--`, or at the first argument that is neither one of
// its options nor an option's value. That one is the program; everything after it is the
// program's, passed on untouched and in order (as torchrun does), whatever it looks like.
struct SplitArgs {
  std::vector<std::string> launcher;  // for CLI11, ending in "--" PROGRAM when there is a program
  std::vector<std::string> command;   // PROGRAM ARGS...
  std::string unknown;                // the first option before PROGRAM that the launcher lacks
};

SplitArgs split_arguments(const CLI::App& app, int argc, char** argv) {
  SplitArgs s;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.size() < 2 || a[0] != '-') break;  // the program
    s.launcher.push_back(a);
    const bool has_inline_value = a.find('=') != std::string::npos;
    const CLI::Option* opt = app.get_option_no_throw(a.substr(0, a.find('=')));
    if (!opt && s.unknown.empty()) s.unknown = a;
    // An option that takes a value takes the next argument when none came with "=".
    if (opt && opt->get_items_expected_max() > 0 && !has_inline_value && i + 1 < argc) s.launcher.push_back(argv[++i]);
  }
  for (; i < argc; ++i) s.command.push_back(argv[i]);
  if (!s.command.empty()) {
    s.launcher.push_back("--");  // the program may itself start with '-'
    s.launcher.push_back(s.command.front());
  }
  return s;
}

}  // namespace

static int launch(int argc, char** argv) {
  CLI::App app{"Runs PROGRAM as a data-parallel job, one process per rank, like torchrun.\n"
               "The launcher's options come before PROGRAM (or before --); everything after PROGRAM is\n"
               "passed to it unchanged and in order."};
  cg::cli::configure(app, "cudagrad-launch");
  int nproc = 1, nnodes = 1, node_rank = 0, port = 29500, max_restarts = 0, grace_s = 10;
  std::string addr = "127.0.0.1", program;
  bool standalone = false;
  // Upper bounds as the trainer's config has them: a mistyped count must be refused,
  // not fork without end or size tables past memory. 1024 ranks per node, 65536 nodes: far
  // beyond any machine or cluster this runs on.
  app.add_option("--nproc-per-node,--nproc_per_node", nproc, "processes on this node")->check(cg::cli::between(1, 1024));
  app.add_option("--nnodes", nnodes, "nodes in the job")->check(cg::cli::between(1, 65536));
  app.add_option("--node-rank,--node_rank", node_rank, "this node's index")->check(cg::cli::at_least(0));
  app.add_option("--master-addr,--master_addr", addr, "address of rank 0's node");
  app.add_option("--master-port,--master_port", port, "rendezvous port on rank 0's node")->check(CLI::Range(1, 65535));
  app.add_flag("--standalone", standalone, "single node on a free local port");
  app.add_option("--max-restarts,--max_restarts", max_restarts, "restarts of the whole group after a failure")
      ->check(cg::cli::at_least(0));
  std::string job_id;
  app.add_option("--rdzv-id,--rdzv_id", job_id,
                 "the job's id, the same on every node (as torchrun's): ranks of another job trying the same port "
                 "are refused at rendezvous; one node: a random one when not given");
  app.add_option("--grace-seconds", grace_s, "after SIGTERM (a failed rank's peers) or a forwarded Ctrl-C, how long before SIGKILL")->check(cg::cli::at_least(1));
  app.add_option("PROGRAM", program, "the program to run, then its arguments ([--] PROGRAM [ARGS...])")->required();
  app.footer("example: cudagrad-launch --standalone --nproc-per-node 2 build/apps/cudagrad-train --config "
             "configs/fashion_mnist_cpu.yaml train.epochs=1");
  const SplitArgs args = split_arguments(app, argc, argv);
  // Before CLI11, which would report a missing PROGRAM first: a misspelt option is the likelier mistake.
  if (!args.unknown.empty())
    return cg::cli::usage_error(app, "unknown option " + args.unknown + " (the program's options go after PROGRAM)");
  if (const int rc = cg::cli::parse(app, args.launcher); rc >= 0) return rc;
  if (node_rank >= nnodes)
    return cg::cli::usage_error(app, "--node-rank " + std::to_string(node_rank) + " needs --nnodes > " +
                                         std::to_string(node_rank));
  if (const std::string why = why_not_runnable(args.command.front()); !why.empty())
    return cg::cli::usage_error(app, "cannot run " + args.command.front() + ": " + why);
  if (standalone) {
    if (nnodes > 1) return cg::cli::usage_error(app, "--standalone is one node; it cannot go with --nnodes > 1");
    addr = "127.0.0.1";
    port = free_port();
  }
  export_job_token(job_id, nnodes);
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  for (int attempt = 0;; ++attempt) {
    const int rc = run_group(nproc, node_rank, nnodes, addr, port, attempt, args.command, std::chrono::seconds(grace_s));
    if (rc == 0 || g_signal || attempt >= max_restarts) return rc;
    std::fprintf(stderr, "cudagrad-launch: restarting the group (%d of %d)\n", attempt + 1, max_restarts);
  }
}

int main(int argc, char** argv) {
  cg::cli::exit_one_on_uncaught_out_of_memory("cudagrad-launch");
  try {
    return launch(argc, argv);
  } catch (const std::exception& e) {  // the ranks' own failures are exit codes; this is the launcher's
    const std::string what = cg::cli::error_text(e);
    std::fprintf(stderr, "cudagrad-launch: error: %s\n", what.c_str());
    return 1;
  }
}
