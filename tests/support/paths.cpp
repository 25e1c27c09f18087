#include "support/paths.h"

#include <unistd.h>

#include <atomic>
#include <string>

namespace cg::test {

std::filesystem::path make_temp_dir(const std::string& tag) {
  static std::atomic<int> counter{0};
  auto dir = std::filesystem::temp_directory_path() /
             ("cudagrad_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace cg::test
