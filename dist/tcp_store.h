// The rendezvous store: a small key-value server that rank 0 hosts at MASTER_ADDR:MASTER_PORT
// and every rank (rank 0 included) talks to over TCP. It is how processes find each other: they
// exchange transport addresses through it, count arrivals at barriers, and compare configs.
// Every wait has a timeout, so a rank that never joins (or dies) turns into an error naming what
// was awaited, never a hang; a client whose store goes quiet (a network partition) gives up a
// few seconds after the timeout rather than wait on the socket for ever.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cg::dist {

class TcpStoreServer;

struct TcpStoreOptions {
  std::string host = "127.0.0.1";
  int port = 29500;
  bool is_server = false;  // rank 0 hosts the store
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  // The world size, when known: the server checks that its descriptor limit can hold that many
  // connections (one per rank, all open at once during rendezvous).
  int expected_clients = 0;
  // The job's token (CUDAGRAD_JOB_TOKEN, which cudagrad-launch sets; empty: none). The server
  // serves only clients that say the same one, so a rank of another job trying the same port (an
  // earlier job's, still retrying) is refused with an error naming the cause instead of joining.
  std::string job_token;
};

class TcpStore {
 public:
  // The server side (when is_server) starts listening at once; the client connects with retries
  // until the timeout, so ranks may start in any order.
  explicit TcpStore(const TcpStoreOptions& options);
  ~TcpStore();
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(const std::string& key, const std::vector<char>& value);
  void set(const std::string& key, const std::string& value);
  // Blocks until the key exists (or the timeout passes: cg::Error naming the key).
  std::vector<char> get(const std::string& key);
  std::string get_string(const std::string& key);
  // Atomically adds delta to the integer at key (0 when absent) and returns the new value.
  int64_t add(const std::string& key, int64_t delta);
  // Blocks until `count` callers have reached the barrier called `name` (names may repeat: each
  // use is a new generation, as long as all ranks call barriers in the same order).
  void barrier(const std::string& name, int count);

  std::chrono::milliseconds timeout() const { return options_.timeout; }
  // This rank's end of its connection to the store (numeric): the address of the interface that
  // reaches MASTER_ADDR, which is what peers on other nodes can reach too (dist/advertised_address.h).
  std::string local_address() const;

 private:
  std::vector<char> request(uint8_t op, const std::string& key, const std::vector<char>& value);
  void throw_if_server_failed() const;
  void say_hello();

  TcpStoreOptions options_;
  std::unique_ptr<TcpStoreServer> server_;
  int fd_ = -1;
  std::mutex mutex_;  // one request at a time on the connection
  int64_t barrier_generation_ = 0;
};

}  // namespace cg::dist
