#include "support/processes.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>

namespace cg::test {
namespace {

std::mutex g_logs_mutex;  // tests start ranks from several threads
std::map<pid_t, std::filesystem::path> g_logs;

}  // namespace

std::string sanitizer_report(const std::string& output) {
  // What each sanitizer's report starts with (UBSan's follows "file:line:col: ").
  static const char* const kHeaders[] = {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                                         "WARNING: ThreadSanitizer", "ERROR: ThreadSanitizer"};
  size_t first = std::string::npos;
  for (const char* header : kHeaders) first = std::min(first, output.find(header));
  if (first == std::string::npos) return "";
  const size_t begin = output.rfind('\n', first);
  const size_t line_start = begin == std::string::npos ? 0 : begin + 1;
  return output.substr(line_start, output.find('\n', first) - line_start);
}

bool expect_no_sanitizer_report(int exit_code, const std::string& output, const std::string& what) {
  const std::string report = sanitizer_report(output);
  if (report.empty() && exit_code != kSanitizerExitCode) return true;
  ADD_FAILURE() << what << " was stopped by a sanitizer (exit code " << exit_code << "; " << kSanitizerExitCode
                << " is the sanitizers'): " << (report.empty() ? "no report in its output" : report)
                << "\n--- its output ---\n"
                << output;
  return false;
}

void remember_log(pid_t pid, const std::filesystem::path& log) {
  std::lock_guard<std::mutex> lock(g_logs_mutex);
  g_logs[pid] = log;
}

std::filesystem::path take_log(pid_t pid) {
  std::lock_guard<std::mutex> lock(g_logs_mutex);
  const auto it = g_logs.find(pid);
  if (it == g_logs.end()) return {};
  std::filesystem::path log = it->second;
  g_logs.erase(it);
  return log;
}

int wait_for(pid_t pid, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  int code = -1;
  while (std::chrono::steady_clock::now() < end) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (code == -1) {
    kill(-pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  if (const std::filesystem::path log = take_log(pid); !log.empty())
    expect_no_sanitizer_report(code, read_text(log), "the child logging to " + log.string());
  return code;
}

}  // namespace cg::test
