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

// The advice an error or warning about the limit gives, naming the numbers.
std::string fd_limit_advice(const FdLimit& limit, int clients);

}  // namespace cg::dist
