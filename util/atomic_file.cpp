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
[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw Error(fmt::format("cannot write {}: {} ({})", path, what, std::strerror(err)));
}
}  // namespace

void write_file_atomically(const std::string& path, std::string_view contents) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("creating directory " + dir.string(), path, ec.value());

  std::string tmp = (dir / ("." + target.filename().string() + ".tmp.XXXXXX")).string();
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail("creating a temporary file", path, errno);
  auto abandon = [&](const std::string& what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    fail(what, path, err);
  };
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      abandon("writing");
    }
    done += size_t(n);
  }
  if (::fchmod(fd, 0644) != 0) abandon("setting permissions");
  if (::fsync(fd) != 0) abandon("flushing to disk");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail("closing", path, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail("renaming the temporary file into place", path, err);
  }
  // The rename is durable only once the directory entry is on disk.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace cg
