// Error reporting shared by every layer: one exception type and one check macro that names the
// file:line and the failed condition. Library code throws; apps turn exceptions into exit codes.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace cg {

// Any failure the caller can report: bad input, a broken invariant, a failed system call.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad user input (config, command line): apps exit with code 2 on it, before any work starts.
class UsageError : public Error {
 public:
  using Error::Error;
};

// An allocation that failed (host or GPU memory, or a std::bad_alloc turned into one with its
// context): a runtime error (exit 1), which the trainer reports with the sizes the config asked for.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

[[noreturn]] inline void fail_at(const char* file, int line, const std::string& what) {
  throw Error(fmt::format("{} ({}:{})", what, file, line));
}

}  // namespace cg

// CG_CHECK(cond, "format {}", args...): throws cg::Error naming the condition and file:line.
#define CG_CHECK(cond, ...)                                                                  \
  do {                                                                                       \
    if (!(cond)) ::cg::fail_at(__FILE__, __LINE__,                                           \
                               std::string("check failed: " #cond ": ") + fmt::format(__VA_ARGS__)); \
  } while (0)

#define CG_FAIL(...) ::cg::fail_at(__FILE__, __LINE__, fmt::format(__VA_ARGS__))
