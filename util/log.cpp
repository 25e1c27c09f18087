#include "util/log.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace cg::log {
namespace {
int g_rank = 0, g_world = 1;
std::mutex g_mutex;  // whole lines, even when loader threads warn

// cudagrad-launch prefixes every line with the rank already; other launchers (mpirun) do not.
std::string prefix() {
  static const bool launcher_prefixes = std::getenv("CUDAGRAD_LAUNCHED") != nullptr;
  return g_world > 1 && !launcher_prefixes ? fmt::format("[rank {}] ", g_rank) : std::string();
}

void put(std::FILE* stream, const std::string& text) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fputs(text.c_str(), stream);
  std::fputc('\n', stream);
  std::fflush(stream);
}
}  // namespace

void set_rank(int rank, int world_size) {
  g_rank = rank;
  g_world = world_size;
}
int rank() { return g_rank; }
bool is_main_process() { return g_rank == 0; }

void write_info(const std::string& line) { put(stdout, prefix() + line); }
void write_warning(const std::string& line) { put(stderr, prefix() + "warning: " + line); }
void write_error(const std::string& line) { put(stderr, prefix() + "error: " + line); }

}  // namespace cg::log
