// A small tmpfs mounted for one test, so that a write fails with a true ENOSPC (a file size
// limit gives EFBIG instead, at write() only). Mounting needs root; why_not() says why there is no
// mount, for NEED_TOOL (support/need_tool.h). Unmounted (lazily) when the object goes.
#pragma once
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

namespace cg::test {

class TmpfsMount {
 public:
  TmpfsMount(const std::filesystem::path& dir, long bytes) : dir_(dir) {
    std::filesystem::create_directories(dir);
    if (::geteuid() != 0) {
      why_not_ = "needs root to mount a tmpfs";
      return;
    }
    const std::string options = "size=" + std::to_string(bytes) + ",mode=0755";
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, options.c_str()) != 0)
      why_not_ = "cannot mount a tmpfs at " + dir.string() + ": " + std::strerror(errno);
    else
      mounted_ = true;
  }
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;
  ~TmpfsMount() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  const std::string& why_not() const { return why_not_; }

 private:
  std::filesystem::path dir_;
  std::string why_not_;
  bool mounted_ = false;
};

}  // namespace cg::test
