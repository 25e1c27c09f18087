// Rank-aware logging, as in the seed's utils/logger.py: progress and info go out on rank 0 only;
// warnings and errors go out on every rank, prefixed with the rank so interleaved output from
// several processes stays readable. Single-process runs print no prefix.
#pragma once
#include <fmt/format.h>

#include <string>

namespace cg::log {

void set_rank(int rank, int world_size);
int rank();
bool is_main_process();

void write_info(const std::string& line);
void write_warning(const std::string& line);
void write_error(const std::string& line);

template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  if (is_main_process()) write_info(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  write_warning(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  write_error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace cg::log
