// Blocking socket calls with a deadline, for the rendezvous store's client. A connection over a
// network can go quiet without closing: a partition or a firewall drops packets, and a plain
// connect() then takes the kernel's two minutes of SYN retries, a plain recv() for ever. These
// return at the deadline instead, so every wait of a rank is bounded by dist.timeout_s.
#pragma once
#include <netdb.h>

#include <chrono>
#include <cstddef>
#include <string>

namespace cg::dist {

using SocketClock = std::chrono::steady_clock;

// Connects a new TCP socket to `addr` before `deadline`: the connected socket (blocking again),
// or -1 with `error` set (strerror's text, or "timed out").
int connect_before(const addrinfo& addr, SocketClock::time_point deadline, std::string& error);

enum class Received { ok, closed, timed_out };

// Receives exactly n bytes before `deadline`; `closed`: the peer closed or the socket failed.
Received recv_before(int fd, void* data, size_t n, SocketClock::time_point deadline);

}  // namespace cg::dist
