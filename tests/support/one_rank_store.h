// The rendezvous store of a one-process group (rank 0 of 1, serving on a free port): what the
// single-rank NCCL and ProcessGroup tests make first.
#pragma once
#include "dist/tcp_store.h"
#include "support/free_port.h"

namespace cg::test {

inline dist::TcpStoreOptions one_rank_store_options() {
  dist::TcpStoreOptions so;
  so.port = free_port();
  so.is_server = true;
  return so;
}

// TcpStore cannot move; returned as a prvalue, it is built in place in the caller's variable.
inline dist::TcpStore one_rank_store() { return dist::TcpStore(one_rank_store_options()); }

}  // namespace cg::test
