#include "dist/socket_deadline.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace cg::dist {
namespace {

// Milliseconds from now to `deadline` for poll(), at least 0 and at most a minute at a time (the
// callers loop), so that a far deadline cannot overflow an int.
int poll_ms_until(SocketClock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SocketClock::now()).count();
  return int(std::clamp<int64_t>(left, 0, 60'000));
}

// Waits until `fd` is ready for `events`; false when the deadline came first.
bool wait_ready(int fd, short events, SocketClock::time_point deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const int ms = poll_ms_until(deadline);
    const int rc = ::poll(&p, 1, ms);
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return true;  // let the next call report the socket's error
    if (rc == 0 && SocketClock::now() >= deadline) return false;
  }
}

}  // namespace

int connect_before(const addrinfo& addr, SocketClock::time_point deadline, std::string& error) {
  const int fd = ::socket(addr.ai_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    error = std::strerror(errno);
    return -1;
  }
  int err = ::connect(fd, addr.ai_addr, addr.ai_addrlen) == 0 ? 0 : errno;
  if (err == EINPROGRESS) {
    if (!wait_ready(fd, POLLOUT, deadline)) {
      ::close(fd);
      error = "timed out";
      return -1;
    }
    socklen_t len = sizeof(err);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  }
  if (err != 0) {
    ::close(fd);
    error = std::strerror(err);
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

Received recv_before(int fd, void* data, size_t n, SocketClock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    if (!wait_ready(fd, POLLIN, deadline)) return Received::timed_out;
    const ssize_t k = ::recv(fd, p, n, MSG_DONTWAIT);
    if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (k <= 0) return Received::closed;
    p += k;
    n -= size_t(k);
  }
  return Received::ok;
}

}  // namespace cg::dist
