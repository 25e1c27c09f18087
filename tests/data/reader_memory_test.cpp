// A dataset file whose header promises far more data than it holds must fail as truncated after
// allocating about what the file holds, not what the header promises (fuzzing found a 14-byte IDX
// file that made the reader zero-fill 64 MiB and reserve 256 MiB). Checked in a child process
// whose address space is capped a little above what it already uses.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "data/idx_reader.h"
#include "data_test_files.h"
#include "support/paths.h"

namespace cg::data {
namespace {

// Virtual memory in use by this process, from /proc/self/status.
long vm_size_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmSize:", 0) == 0) return std::stol(line.substr(7)) * 1024;
  return -1;
}

TEST(ReaderMemory, AnIdxHeaderPromisingGigabytesCostsWhatTheFileHolds) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizers reserve terabytes of address space: a cap on it cannot work";
#endif
  const auto dir = test::make_temp_dir("reader_memory");
  const std::string path = (dir / "images").string();
  // 2^31 + 4 images of 1x1: about 2 GiB promised, 6 bytes present.
  test_files::write_file(path, std::string("\0\0\x08\x03", 4) + test_files::be32(0x80000004u) + test_files::be32(1) +
                                   test_files::be32(1) + "abcdef",
                         false);
  const pid_t pid = fork();
  if (pid == 0) {
    const long cap = vm_size_bytes() + (48l << 20);  // 48 MiB of headroom; the old code wanted 64 MiB at once
    rlimit limit{rlim_t(cap), rlim_t(cap)};
    setrlimit(RLIMIT_AS, &limit);
    try {
      read_idx_ubyte(path, 3);
    } catch (const Error& e) {
      _exit(std::string(e.what()).find("truncated") != std::string::npos ? 0 : 2);
    } catch (const std::bad_alloc&) {
      _exit(3);
    }
    _exit(4);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: ran out of memory, 2: another error, 4: accepted";
}

}  // namespace
}  // namespace cg::data
