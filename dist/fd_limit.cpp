#include "dist/fd_limit.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <vector>

namespace cg::dist {

FdLimit fd_limit() {
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  auto value = [](rlim_t v) { return v == RLIM_INFINITY ? -1L : long(v); };
  return {value(lim.rlim_cur), value(lim.rlim_max)};
}

FdLimit raise_fd_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);  // on failure the old limit stays, and fd_limit() says so
  }
  return fd_limit();
}

bool can_open_descriptors(int fd, int n) {
  std::vector<int> copies;
  for (int i = 0; i < n; ++i) {
    const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) break;
    copies.push_back(copy);
  }
  for (int copy : copies) ::close(copy);
  return int(copies.size()) == n;
}

long fds_needed(int clients) { return long(clients) + 64; }

std::string fd_limit_advice(const FdLimit& limit, int clients) {
  return fmt::format("RLIMIT_NOFILE is {} (soft) / {} (hard) and the store needs about {} descriptors for {} "
                     "ranks: raise it where rank 0 starts (ulimit -n {}, or LimitNOFILE= / limits.conf)",
                     limit.soft, limit.hard, fds_needed(clients), clients, fds_needed(clients));
}

}  // namespace cg::dist
