// How much memory this machine can still give, asked before large allocations. Linux overcommits:
// a buffer far larger than the machine is granted, and the process is killed when it first touches
// the pages, with no word about which setting asked for it. Checking the need first turns that into
// an error naming the keys.
#pragma once
#include <cstdint>
#include <string>

namespace cg {

// MemAvailable from /proc/meminfo (what can be allocated without swapping), else the physical
// memory; 0 when neither can be read (then nothing is refused).
uint64_t available_host_memory();

// Throws cg::UsageError "<what> needs X GiB of host memory, but this machine has Y GiB available;
// <advice>" when need_bytes exceeds available_host_memory(), unless the environment variable
// kSkipMemoryEstimate is "1" (the estimate is generous, counting every batch that may be in flight,
// and MemAvailable can be too low where the kernel would still reclaim caches).
inline constexpr const char* kSkipMemoryEstimate = "CUDAGRAD_NO_MEMORY_ESTIMATE";
void check_host_memory(double need_bytes, const std::string& what, const std::string& advice);

}  // namespace cg
