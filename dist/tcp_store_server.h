// The rendezvous store's server (rank 0 hosts it; dist/tcp_store.h is the client every rank uses):
// a listening socket, one thread per connected rank, and the key-value map.
// At a thousand ranks (issue 26): the listen backlog is the kernel's maximum, so a thousand ranks
// connecting at once are not dropped into SYN retries; a get waits on its own key's condition
// variable, so a set wakes only the ranks waiting for that key (one shared condition variable
// woke every waiting rank on every set: N^2 wakeups at a barrier); the soft descriptor limit is
// raised to the hard one at start; and running out of descriptors stops the store with an error
// naming the limit, instead of spinning on accept() while ranks wait out their timeout.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/tcp_store_protocol.h"

namespace cg::dist {

class TcpStoreServer {
 public:
  // Listens on `port` at once (cg::Error when it cannot). `expected_clients` (0: unknown) is
  // checked against the descriptor limit, with a warning when the limit is too low. `job_token`
  // (empty: any client is served): a client must say it first (hello), or it is refused as one of
  // another job, such as a rank of an earlier job still trying the same port. `max_keys`: a
  // client that would store more keys than this is dropped.
  TcpStoreServer(int port, int expected_clients, std::string job_token = "",
                 size_t max_keys = store_protocol::kMaxKeys);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  // Empty while the store works; else why it stopped (it ran out of descriptors). Rank 0's client
  // reports this instead of a bare lost connection. Once stopped, it first waits (at most
  // `kReleaseBound`) until the handlers have closed the connections the stop shut: the process is
  // at its descriptor limit, and whatever rank 0 does with the error (a log file, a checkpoint, a
  // sanitizer's own pipe) needs descriptors again.
  std::string failure() const;
  static constexpr std::chrono::seconds kReleaseBound{2};
  // How often a waiting get woke up before its key was there or its wait ended (for tests: with a
  // condition variable per key a set wakes only that key's waiters).
  int64_t wakeups() const { return wakeups_; }
  // Handler threads not yet joined (for tests: finished ones are joined as new clients arrive).
  size_t handler_threads() const;

 private:
  struct Waiters {
    std::condition_variable changed;
    int count = 0;
  };

  void accept_loop();
  void on_accept_error(int err);
  void fail(const std::string& why);
  void serve(int c, std::atomic<bool>* done);
  bool admit(int c, const store_protocol::Request& hello);
  bool answer(int c, store_protocol::Request& req);
  void join_finished_handlers();
  bool wait_for_key(std::unique_lock<std::mutex>& lock, const std::string& key, int64_t wait_ms);
  void notify_key(const std::string& key);

  struct Handler {
    std::thread thread;
    std::unique_ptr<std::atomic<bool>> done;  // set by the thread as its last act
  };

  int fd_ = -1;
  int expected_clients_ = 0;
  std::string job_token_;
  size_t max_keys_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> wakeups_{0};
  std::thread acceptor_;
  mutable std::mutex mutex_;  // everything below
  std::map<std::string, std::vector<char>> data_;
  std::map<std::string, Waiters> waiting_;  // by key; a node-based map, so entries stay put
  std::vector<int> clients_;
  int closing_ = 0;  // connections forgotten from clients_ whose close() has not returned yet
  mutable std::condition_variable released_;  // clients_ empty and closing_ zero
  std::vector<Handler> handlers_;  // the acceptor's (and, once it has stopped, the destructor's)
  mutable std::mutex handlers_mutex_;  // for handler_threads() only
  std::string failure_;
};

}  // namespace cg::dist
