// Atomic replacement of a file via write-to-temporary + fsync + rename. Rule: until rename()
// succeeds nothing is visible under the target name, and every failure removes the temporary.
#include "util/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "util/check.h"

namespace cg {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& step, int err) {
  throw Error(fmt::format("cannot write {}: {} failed: {}", path, step, std::strerror(err)));
}

// Owns the temporary file until it has been renamed into place; removes it otherwise.
class TempFile {
 public:
  TempFile(const std::string& target, const std::filesystem::path& dir)
      : target_(target),
        name_((dir / fmt::format(".{}.tmp.XXXXXX", std::filesystem::path(target).filename().string())).string()) {
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
  for (std::string_view piece : pieces) tmp.write(piece);
  tmp.commit();
  sync_directory(path, dir);
}

void write_file_atomically(const std::string& path, std::string_view contents) {
  write_file_atomically(path, std::span<const std::string_view>(&contents, 1));
}

}  // namespace cg
