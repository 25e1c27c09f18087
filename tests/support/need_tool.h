// NEED_TOOL(why_missing): the first line of a test that needs something other than a GPU: mpirun,
// PyTorch or the safetensors package in Debian's python3, Fashion-MNIST, root, a tmpfs mount.
// `why_missing` is "" when it is there. Otherwise the test is skipped, saying why; with
// CUDAGRAD_REQUIRE_ALL=1 in the environment (scripts/test.sh sets it, so CI does) it fails
// instead, so that a machine missing a tool cannot pass the suite by skipping what needs it.
// GPU tests use NEED_GPU() (support/need_gpu.h): a machine without a GPU skips them either way.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace cg::test {

// Read at each use, so a test may set it for itself.
inline bool all_tools_required() {
  const char* v = std::getenv("CUDAGRAD_REQUIRE_ALL");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

// "" when `command` is on the PATH, else why the test cannot run ("needs mpirun (<package>)").
inline std::string missing_command(const std::string& command, const std::string& package) {
  if (std::system(("command -v " + command + " > /dev/null 2>&1").c_str()) == 0) return "";
  return "needs " + command + " (" + package + ")";
}

// "" when Debian's /usr/bin/python3 imports `module`, else why the test cannot run.
inline std::string missing_python_module(const std::string& module, const std::string& package) {
  if (std::system(("/usr/bin/python3 -c 'import " + module + "' > /dev/null 2>&1").c_str()) == 0) return "";
  return "needs /usr/bin/python3 with " + module + " (" + package + ")";
}

}  // namespace cg::test

// Returns from the test (void function) when it cannot run.
#define NEED_TOOL(why_missing)                                                         \
  do {                                                                                 \
    const std::string cg_why_missing_ = (why_missing);                                 \
    if (!cg_why_missing_.empty()) {                                                    \
      if (::cg::test::all_tools_required())                                            \
        GTEST_FAIL() << cg_why_missing_ << ", and CUDAGRAD_REQUIRE_ALL is set";        \
      GTEST_SKIP() << cg_why_missing_;                                                 \
    }                                                                                  \
  } while (0)
