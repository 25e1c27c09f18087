// Atomic replacement of a file via write-to-temporary + fsync + rename. Rule: until rename()
// succeeds nothing is visible under the target name, and every failure removes the temporary.
// A process killed outright (SIGKILL, OOM) cannot remove its temporary, so temporaries carry the
// writer's pid (`.<name>.tmp.<pid>.XXXXXX`) and the next successful write of the same name removes
// those whose writer no longer runs on this host.
// Test hook, off unless set: CUDAGRAD_TEST_STALL_WRITE_MS=<ms> makes a file written in several
// pieces (a checkpoint) pause that long after its first piece, so that a test can kill the writer
// while its temporary is certainly incomplete (tests/fault/checkpoint_fault_test.cpp); a random
// kill rarely lands inside a write that takes a few milliseconds.
#include "util/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "util/check.h"

namespace cg {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& step, int err) {
  throw Error(fmt::format("cannot write {}: {} failed: {}", path, step, std::strerror(err)));
}

// Every temporary of `target` starts with this, followed by the writer's pid.
std::string temp_prefix(const std::string& target) {
  return fmt::format(".{}.tmp.", std::filesystem::path(target).filename().string());
}

// Removes the temporaries of `target` in `dir` left by writers that died (their pid is gone).
// Best effort: a file that cannot be listed or removed is left alone.
void remove_dead_writers_temporaries(const std::string& target, const std::filesystem::path& dir) {
  const std::string prefix = temp_prefix(target);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());  // "<pid>.XXXXXX"
    const size_t dot = rest.find('.');
    if (dot == 0 || dot == std::string::npos || rest.find_first_not_of("0123456789") != dot) continue;
    const long pid = std::strtol(rest.c_str(), nullptr, 10);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(pid_t(pid), 0) != 0 && errno == ESRCH) std::filesystem::remove(entry.path(), ec);
  }
}

// The test hook above; a value that is not a count of milliseconds is refused, naming the variable.
void stall_if_a_test_asks() {
  const char* value = std::getenv("CUDAGRAD_TEST_STALL_WRITE_MS");
  if (value == nullptr || *value == '\0') return;
  char* end = nullptr;
  const long ms = std::strtol(value, &end, 10);
  CG_CHECK(*end == '\0' && ms >= 0, "CUDAGRAD_TEST_STALL_WRITE_MS={}: not a number of milliseconds", value);
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// Owns the temporary file until it has been renamed into place; removes it otherwise.
class TempFile {
 public:
  TempFile(const std::string& target, const std::filesystem::path& dir)
      : target_(target),
        name_((dir / (temp_prefix(target) + fmt::format("{}.XXXXXX", ::getpid()))).string()) {
    fd_ = ::mkstemp(name_.data());  // mkstemp fills in the X's with a unique suffix
    if (fd_ < 0) fail(target_, "creating a temporary file in " + dir.string(), errno);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!renamed_) ::unlink(name_.c_str());
  }

  void write(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail(target_, "writing", errno);  // ENOSPC: disk full
      bytes.remove_prefix(size_t(n));
    }
  }

  void commit() {
    // mkstemp creates 0600; a checkpoint or log should be readable like any other output file.
    if (::fchmod(fd_, 0644) != 0) fail(target_, "setting permissions", errno);
    if (::fsync(fd_) != 0) fail(target_, "flushing to disk (fsync)", errno);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail(target_, "closing", errno);  // NFS reports write errors here
    if (::rename(name_.c_str(), target_.c_str()) != 0) fail(target_, "renaming the temporary file into place", errno);
    renamed_ = true;
  }

 private:
  std::string target_, name_;
  int fd_ = -1;
  bool renamed_ = false;
};

// The rename is durable only once the directory entry itself is on disk.
void sync_directory(const std::string& target, const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail(target, "opening directory " + dir.string() + " to sync it", errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems cannot sync a directory (EINVAL); the file itself is already on disk.
  if (rc != 0 && err != EINVAL) fail(target, "syncing directory " + dir.string(), err);
}

}  // namespace

void write_file_atomically(const std::string& path, std::span<const std::string_view> pieces) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  CG_CHECK(!path.empty() && target.has_filename(), "cannot write '{}': not a file name", path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(path, "creating directory " + dir.string(), ec.value());

  TempFile tmp(path, dir);
  for (size_t i = 0; i < pieces.size(); ++i) {
    tmp.write(pieces[i]);
    if (i == 0 && pieces.size() > 1) stall_if_a_test_asks();
  }
  tmp.commit();
  sync_directory(path, dir);
  remove_dead_writers_temporaries(path, dir);
}

void write_file_atomically(const std::string& path, std::string_view contents) {
  write_file_atomically(path, std::span<const std::string_view>(&contents, 1));
}

}  // namespace cg
