// write_file_atomically: the target is always the old or the whole new file, failures name the
// path and the cause, and no temporary file is ever left behind.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "support/paths.h"
#include "util/atomic_file.h"
#include "util/check.h"

namespace cg {
namespace {

namespace fs = std::filesystem;

std::string contents(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string write_error(const std::string& path, std::string_view text) {
  try {
    write_file_atomically(path, text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(written without error)";
}

TEST(AtomicFile, CreatesParentsAndReplacesTheTargetWhole) {
  const auto dir = test::make_temp_dir("atomic");
  const fs::path path = dir / "a" / "b" / "f.bin";
  write_file_atomically(path.string(), "first version, the longer one");
  EXPECT_EQ(contents(path), "first version, the longer one");
  write_file_atomically(path.string(), std::string("second\0binary", 13));
  EXPECT_EQ(contents(path), std::string("second\0binary", 13)) << "no tail of the old contents may remain";
  EXPECT_EQ(entries(dir / "a" / "b"), std::vector<std::string>{"f.bin"}) << "a temporary file was left behind";
}

// What a writer killed by SIGKILL leaves: its temporary, named after its pid. The next write of the
// same name removes it; a live writer's temporary and other files' temporaries stay.
TEST(AtomicFile, TemporariesOfDeadWritersAreRemovedByTheNextWrite) {
  const auto dir = test::make_temp_dir("atomic_stale");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);  // reaped: its pid no longer runs
  const std::string dead = fmt::format(".last.bin.tmp.{}.Ab12Cd", child);
  const std::string alive = fmt::format(".last.bin.tmp.{}.Xy34Zw", ::getppid());
  const std::string other = fmt::format(".epoch_1.bin.tmp.{}.Qr56St", child);
  for (const auto& name : {dead, alive, other}) std::ofstream(dir / name) << "partial";
  write_file_atomically((dir / "last.bin").string(), "whole");
  EXPECT_EQ(entries(dir), (std::vector<std::string>{other, alive, "last.bin"}));
}

TEST(AtomicFile, PiecesAreWrittenInOrder) {
  const fs::path path = test::make_temp_dir("atomic_pieces") / "f.txt";
  const std::string_view pieces[] = {"one ", "", "two ", "three"};
  write_file_atomically(path.string(), pieces);
  EXPECT_EQ(contents(path), "one two three");
  write_file_atomically(path.string(), std::span<const std::string_view>());
  EXPECT_EQ(fs::file_size(path), 0u);
}

TEST(AtomicFile, NewFilesAreReadableByOthers) {
  const fs::path path = test::make_temp_dir("atomic_mode") / "f.txt";
  write_file_atomically(path.string(), "x");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST(AtomicFile, UncreatableParentNamesThePathAndCause) {
  const auto dir = test::make_temp_dir("atomic_parent");
  write_file_atomically((dir / "file").string(), "x");
  const std::string path = (dir / "file" / "inside.txt").string();  // the parent is a file
  const std::string err = write_error(path, "y");
  EXPECT_NE(err.find("cannot write " + path), std::string::npos) << err;
  EXPECT_NE(err.find("creating directory"), std::string::npos) << err;
  EXPECT_EQ(entries(dir), std::vector<std::string>{"file"});
}

TEST(AtomicFile, FailedRenameRemovesTheTemporaryAndKeepsTheTarget) {
  const auto dir = test::make_temp_dir("atomic_rename");
  fs::create_directories(dir / "target" / "child");  // a non-empty directory cannot be replaced by a file
  const std::string err = write_error((dir / "target").string(), "data");
  EXPECT_NE(err.find((dir / "target").string()), std::string::npos) << err;
  EXPECT_NE(err.find("renaming"), std::string::npos) << err;
  EXPECT_NE(err.find("Is a directory"), std::string::npos) << "strerror expected: " << err;
  EXPECT_EQ(entries(dir), std::vector<std::string>{"target"}) << "the temporary file was left behind";
  EXPECT_TRUE(fs::is_directory(dir / "target" / "child"));
}

// The write's error as a user without privileges sees it. Root ignores permission bits, so as root
// a child that became nobody (uid 65534) tries the write and sends its error back: the test runs,
// rather than skipping, where CI runs as root.
std::string unprivileged_write_error(const std::string& path, std::string_view text) {
  if (::geteuid() != 0) return write_error(path, text);
  int fds[2];
  if (::pipe(fds) != 0) return "(no pipe to the unprivileged child)";
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    const bool nobody = ::setgid(65534) == 0 && ::setuid(65534) == 0;
    const std::string err = nobody ? write_error(path, text) : "(the child could not become nobody)";
    (void)!::write(fds[1], err.data(), err.size());
    _exit(0);
  }
  ::close(fds[1]);
  std::string err;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) err.append(buf, size_t(n));
  ::close(fds[0]);
  ::waitpid(child, nullptr, 0);
  return err;
}

TEST(AtomicFile, UnwritableDirectoryNamesThePath) {
  const auto dir = test::make_temp_dir("atomic_ro");
  fs::create_directories(dir / "ro");
  fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  const std::string path = (dir / "ro" / "f.txt").string();
  const std::string err = unprivileged_write_error(path, "y");
  fs::permissions(dir / "ro", fs::perms::owner_all);
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_NE(err.find("Permission denied"), std::string::npos) << err;
  EXPECT_TRUE(entries(dir / "ro").empty());
}

TEST(AtomicFile, RejectsAPathWithoutAFileName) {
  EXPECT_THROW(write_file_atomically("", "x"), Error);
  const auto dir = test::make_temp_dir("atomic_noname");
  EXPECT_THROW(write_file_atomically(dir.string() + "/", "x"), Error);
}

// The fault tests' hook (CUDAGRAD_TEST_STALL_WRITE_MS) refuses a value it cannot use, naming
// itself, rather than silently not stalling; unset, nothing changes.
TEST(AtomicFile, StallHookRefusesABadValueNamingTheVariable) {
  const auto dir = test::make_temp_dir("atomic_stall");
  const std::string path = (dir / "f.bin").string();
  const std::vector<std::string_view> pieces{"ab", "cd"};
  ::setenv("CUDAGRAD_TEST_STALL_WRITE_MS", "soon", 1);
  std::string err = "(written without error)";
  try {
    write_file_atomically(path, pieces);
  } catch (const Error& e) {
    err = e.what();
  }
  ::unsetenv("CUDAGRAD_TEST_STALL_WRITE_MS");
  EXPECT_NE(err.find("CUDAGRAD_TEST_STALL_WRITE_MS=soon"), std::string::npos) << err;
  EXPECT_TRUE(entries(dir).empty()) << "the temporary file was left behind";
  write_file_atomically(path, pieces);
  EXPECT_EQ(contents(path), "abcd");
}

}  // namespace
}  // namespace cg
