// The descriptor limit of the process that hosts the rendezvous store: the store keeps one
// connection open per rank for the whole rendezvous, so at a thousand ranks it needs a thousand
// descriptors at once, where many systems start processes with a soft RLIMIT_NOFILE of 1024.
#pragma once
#include <string>

namespace cg::dist {

struct FdLimit {
  long soft = 0;
  long hard = 0;
};

FdLimit fd_limit();

// Raises the soft RLIMIT_NOFILE to the hard one (what any process may do without privileges);
// returns the limit now in force.
FdLimit raise_fd_limit();

// How many descriptors the store process needs for `clients` ranks: one per connection, plus a
// margin for what the trainer itself holds open (listening socket, logs, data files, Gloo).
long fds_needed(int clients);

// Whether the process could open `n` more descriptors now (it dups `fd` n times and closes the
// copies again). The store accepts a rank only while this holds for kFdHeadroom: the process must
// never sit at its limit, where anything (a handler thread, rank 0's log line or checkpoint,
// UBSan's vptr check, which opens a pipe) would fail for want of a descriptor.
bool can_open_descriptors(int fd, int n);
constexpr int kFdHeadroom = 8;

// The advice an error or warning about the limit gives, naming the numbers.
std::string fd_limit_advice(const FdLimit& limit, int clients);

}  // namespace cg::dist
