// Paths tests need: the source tree (configs/, fixtures) and the build tree (the apps), passed in
// by CTest's environment, with a fallback to the compile-time locations.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>

namespace cg::test {

inline std::filesystem::path source_dir() {
  const char* env = std::getenv("CUDAGRAD_SOURCE_DIR");
  return env ? env : CUDAGRAD_TEST_SOURCE_DIR;
}
inline std::filesystem::path binary_dir() {
  const char* env = std::getenv("CUDAGRAD_BINARY_DIR");
  return env ? env : CUDAGRAD_TEST_BINARY_DIR;
}
// A fresh, empty directory under the system temp dir, unique per call.
std::filesystem::path make_temp_dir(const std::string& tag);

}  // namespace cg::test
