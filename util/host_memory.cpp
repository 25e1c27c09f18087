#include "util/host_memory.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "util/check.h"

namespace cg {

uint64_t available_host_memory() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    uint64_t kib = 0;
    if (fields >> kib) return kib * 1024;
  }
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
}

void check_host_memory(double need_bytes, const std::string& what, const std::string& advice) {
  if (const char* off = std::getenv(kSkipMemoryEstimate); off && std::string(off) == "1") return;
  const uint64_t have = available_host_memory();
  if (have == 0 || need_bytes <= double(have)) return;
  constexpr double kGiB = double(1 << 30);
  throw UsageError(fmt::format("{} needs {:.1f} GiB of host memory, but this machine has {:.1f} GiB available; {} "
                               "({}=1 skips this estimate)",
                               what, need_bytes / kGiB, double(have) / kGiB, advice, kSkipMemoryEstimate));
}

}  // namespace cg
