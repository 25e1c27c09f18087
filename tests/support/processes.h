// Tests with real processes (the launcher, the trainer): start a command with its output in a
// log file, wait for it with a time limit, find a rank's process, count what is left running.
// Rule: a sanitizer report in a child fails the test that started it. Under scripts/sanitize.sh a
// child that the sanitizers stop exits with kSanitizerExitCode and prints a report; a test that
// expects the child to fail (exit 1) would otherwise pass on the sanitizer's failure, so wait_for()
// checks both for every child start() started, and expect_no_sanitizer_report() is there for
// children started otherwise (std::system).
#pragma once
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "support/paths.h"

namespace cg::test {

// The exit code scripts/sanitize.sh gives AddressSanitizer, LeakSanitizer, UndefinedBehaviorSanitizer
// and ThreadSanitizer (their own default is 1 for the first three, the code of a runtime error).
inline constexpr int kSanitizerExitCode = 86;

// The first line of a sanitizer report in `output` (an ASan, LSan or TSan header, or UBSan's
// "file:line:col: runtime error: ..."), or "" when there is none.
std::string sanitizer_report(const std::string& output);

// Fails the current test (non-fatally) when the child `what` exited with kSanitizerExitCode or
// printed a sanitizer report, quoting the report; returns whether it was clean.
bool expect_no_sanitizer_report(int exit_code, const std::string& output, const std::string& what);

// A program built into build/apps/.
inline std::string app(const std::string& name) { return (binary_dir() / "apps" / name).string(); }

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Starts `cmd` through the shell, in a process group of its own, with stdout and stderr to
// `log`; returns the pid. `file_size_limit` > 0 caps the size of any file the command writes
// (RLIMIT_FSIZE) with SIGXFSZ ignored, so a write past it fails with EFBIG, as on a full disk.
// start() notes each child's log, so that wait_for() can look for a sanitizer report in it.
void remember_log(pid_t pid, const std::filesystem::path& log);
// The log start() gave `pid`, forgotten from then on; empty when start() did not start it.
std::filesystem::path take_log(pid_t pid);

inline pid_t start(const std::string& cmd, const std::filesystem::path& log, long file_size_limit = 0) {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    if (file_size_limit > 0) {
      signal(SIGXFSZ, SIG_IGN);  // stays ignored across exec
      rlimit limit{rlim_t(file_size_limit), rlim_t(file_size_limit)};
      setrlimit(RLIMIT_FSIZE, &limit);
    }
    const std::string full = "exec " + cmd + " > " + log.string() + " 2>&1";
    execl("/bin/sh", "sh", "-c", full.c_str(), nullptr);
    _exit(127);
  }
  remember_log(pid, log);
  return pid;
}

// Waits up to `limit` for pid; returns its exit code (128 + signal when killed), or -1 on timeout
// (then kills its whole group). For a child of start(), a sanitizer report in its log or the
// sanitizers' exit code fails the test (expect_no_sanitizer_report), whatever the code returned.
int wait_for(pid_t pid, std::chrono::seconds limit);

// Calls `visit(pid, cmdline, environ)` for every process (NULs in cmdline replaced by spaces).
template <class Visit>
void for_each_process(Visit visit) {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = read_text(e.path() / "cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    visit(pid_t(std::stoi(name)), cmdline, e.path());
  }
}

// The pid of the cudagrad-train process of `rank` whose command line contains `marker` (say, its
// unique output directory), or -1.
inline pid_t find_rank(const std::string& marker, int rank) {
  pid_t found = -1;
  for_each_process([&](pid_t pid, const std::string& cmdline, const std::filesystem::path& proc) {
    if (cmdline.find("cudagrad-train") == std::string::npos || cmdline.find(marker) == std::string::npos) return;
    // The global rank: "RANK=<n>" as a whole variable (not the end of LOCAL_RANK or NODE_RANK),
    // which is also the local rank on one node.
    const std::string environ = '\0' + read_text(proc / "environ");
    if (environ.find(std::string("\0RANK=", 6) + std::to_string(rank) + '\0') != std::string::npos) found = pid;
  });
  return found;
}

// How many cudagrad-train processes whose command line contains `marker` exist.
inline int processes_with(const std::string& marker) {
  int n = 0;
  for_each_process([&](pid_t, const std::string& cmdline, const std::filesystem::path&) {
    if (cmdline.find(marker) != std::string::npos && cmdline.find("cudagrad-train") != std::string::npos) ++n;
  });
  return n;
}

}  // namespace cg::test
