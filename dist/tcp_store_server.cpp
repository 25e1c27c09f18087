#include "dist/tcp_store_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "dist/fd_limit.h"
#include "dist/socket_io.h"
#include "util/check.h"
#include "util/log.h"

namespace cg::dist {
namespace {

using namespace store_protocol;

bool send_blob(int fd, const std::vector<char>& v) {
  const uint32_t n = uint32_t(v.size());
  return send_all(fd, &n, 4) && send_all(fd, v.data(), v.size());
}

int listen_on(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  CG_CHECK(fd >= 0, "rendezvous store: socket(): {}", std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(uint16_t(port));
  // The kernel's maximum backlog: with 128, a thousand ranks connecting at once overflow the
  // accept queue and the dropped ones wait out SYN retries (1 s, then 3 s, ...).
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, SOMAXCONN) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error(fmt::format("rendezvous store: cannot listen on port {}: {} (is another job using "
                            "MASTER_PORT={}?)", port, std::strerror(err), port));
  }
  return fd;
}

// Raises the descriptor limit for `expected` ranks, warning when it still cannot hold them.
void prepare_fd_limit(int expected) {
  const FdLimit limit = raise_fd_limit();
  if (expected > 0 && limit.soft >= 0 && limit.soft < fds_needed(expected))
    log::warn("rendezvous store: {}; ranks beyond the limit cannot join", fd_limit_advice(limit, expected));
}

}  // namespace

TcpStoreServer::TcpStoreServer(int port, int expected_clients, std::string job_token, size_t max_keys)
    : expected_clients_(expected_clients), job_token_(std::move(job_token)), max_keys_(max_keys) {
  prepare_fd_limit(expected_clients);
  fd_ = listen_on(port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpStoreServer::~TcpStoreServer() {
  stopping_ = true;
  ::shutdown(fd_, SHUT_RDWR);
  ::close(fd_);
  acceptor_.join();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int c : clients_) ::shutdown(c, SHUT_RDWR);
    for (auto& [key, w] : waiting_) w.changed.notify_all();
  }
  std::lock_guard<std::mutex> lock(handlers_mutex_);
  for (auto& h : handlers_) h.thread.join();
}

size_t TcpStoreServer::handler_threads() const {
  std::lock_guard<std::mutex> lock(handlers_mutex_);
  return handlers_.size();
}

// A thread per connection, joined once its client is gone: a job that restarts, or clients that
// come and go, would otherwise keep every finished thread (and its stack) until the store stops.
void TcpStoreServer::join_finished_handlers() {
  std::lock_guard<std::mutex> lock(handlers_mutex_);
  for (auto it = handlers_.begin(); it != handlers_.end();) {
    if (!it->done->load()) {
      ++it;
      continue;
    }
    it->thread.join();
    it = handlers_.erase(it);
  }
}

std::string TcpStoreServer::failure() const {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!failure_.empty())
    released_.wait_for(lock, kReleaseBound, [this] { return clients_.empty() && closing_ == 0; });
  return failure_;
}

void TcpStoreServer::accept_loop() {
  while (!stopping_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    join_finished_handlers();
    const int c = ::accept(fd_, nullptr, nullptr);
    if (c < 0) {
      on_accept_error(errno);
      continue;
    }
    if (!can_open_descriptors(fd_, kFdHeadroom)) {  // this connection took the last few: out of them
      ::close(c);
      on_accept_error(EMFILE);
      continue;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_.empty()) {  // a failed store turns ranks away at once rather than let them wait
      ::close(c);
      continue;
    }
    int one = 1;
    ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    clients_.push_back(c);
    auto done = std::make_unique<std::atomic<bool>>(false);
    std::atomic<bool>* flag = done.get();
    std::lock_guard<std::mutex> handlers_lock(handlers_mutex_);
    handlers_.push_back({std::thread([this, c, flag] { serve(c, flag); }), std::move(done)});
  }
}

// Out of descriptors is fatal for a rendezvous (every rank keeps its connection open until it
// is over), and retrying at once would spin: the connection stays queued and poll() says so again.
void TcpStoreServer::on_accept_error(int err) {
  if (err == EMFILE || err == ENFILE) {
    size_t accepted = 0;  // connections open now
    {
      std::lock_guard<std::mutex> lock(mutex_);
      accepted = clients_.size();
    }
    const int ranks = std::max(expected_clients_, int(accepted) + 1);
    fail(fmt::format("rendezvous store: out of file descriptors with {} connections open ({}): {}",
                     accepted, err == EMFILE ? "EMFILE, this process's limit" : "ENFILE, the system's limit",
                     fd_limit_advice(fd_limit(), ranks)));
  }
  // Anything else (a connection reset before accept, a signal) is about one connection; the pause
  // keeps a persistent error from spinning, and once failed, gives handlers time to free descriptors.
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

// Stops the store: every connection is shut (its handler ends and frees the descriptor) and every
// waiting get ends, so ranks fail at once instead of waiting out their timeout.
void TcpStoreServer::fail(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!failure_.empty()) return;
  failure_ = why;
  log::error("{}", why);
  for (int c : clients_) ::shutdown(c, SHUT_RDWR);
  for (auto& [key, w] : waiting_) w.changed.notify_all();
}

void TcpStoreServer::serve(int c, std::atomic<bool>* done) {
  const ReadExact read = [c](void* dst, size_t n) { return recv_all(c, dst, n); };
  bool admitted = job_token_.empty();
  while (!stopping_) {
    Request req;
    std::string why;
    const ReadResult got = read_request(read, req, why);
    if (got == ReadResult::malformed)
      log::warn("rendezvous store: dropping a client that sent a malformed request: {}", why);
    if (got != ReadResult::ok) break;
    if (req.op == kHello) {
      if (!(admitted = admit(c, req))) break;
      continue;
    }
    if (!admitted) {
      log::warn("rendezvous store: refused a client that did not say its job token (a rank of another job on "
                "this port?)");
      break;
    }
    if (!answer(c, req)) break;
  }
  // Forgotten before it is closed: the number may be reused at once (a data file, a Gloo socket),
  // and a store that fails or stops shuts down every descriptor it still lists.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    clients_.erase(std::find(clients_.begin(), clients_.end(), c));
    ++closing_;
  }
  ::close(c);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --closing_;
    released_.notify_all();
  }
  done->store(true);
}

// A client's hello: served when it names this job's token (or the store has none).
bool TcpStoreServer::admit(int c, const Request& hello) {
  const bool same_job = job_token_.empty() || hello.key == job_token_;
  if (!same_job)
    log::warn("rendezvous store: refused a client of another job (its job token differs): is an earlier job "
              "still running against this port?");
  const uint8_t status = same_job ? kOk : kWrongJob;
  return send_all(c, &status, 1) && same_job;
}

// Applies one request and sends its reply; false when the client is gone.
bool TcpStoreServer::answer(int c, Request& req) {
  if (req.op != kGet) {  // set and add may create a key: bounded
    std::lock_guard<std::mutex> lock(mutex_);
    if (data_.size() >= max_keys_ && !data_.count(req.key)) {
      log::warn("rendezvous store: dropping a client that would store more than {} keys", max_keys_);
      return false;
    }
  }
  if (req.op == kSet) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      data_[req.key] = std::move(req.value);
      notify_key(req.key);
    }
    const uint8_t ok = kOk;
    return send_all(c, &ok, 1);
  }
  if (req.op == kGet) {
    std::unique_lock<std::mutex> lock(mutex_);
    const bool found = wait_for_key(lock, req.key, req.number);
    const uint8_t status = found ? kOk : kTimeout;
    const std::vector<char> reply = found ? data_[req.key] : std::vector<char>();
    lock.unlock();
    return send_all(c, &status, 1) && send_blob(c, reply);
  }
  int64_t now = 0;  // kAdd
  {
    std::lock_guard<std::mutex> lock(mutex_);
    now = add_to_slot(data_[req.key], req.number);
    notify_key(req.key);
  }
  return send_all(c, &now, 8);
}

// Waits (the lock held, released while waiting) until `key` exists, the wait ends, or the store
// stops; true when the key is there.
bool TcpStoreServer::wait_for_key(std::unique_lock<std::mutex>& lock, const std::string& key, int64_t wait_ms) {
  if (data_.count(key)) return true;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  Waiters& w = waiting_[key];
  ++w.count;
  while (!stopping_ && failure_.empty() && !data_.count(key)) {
    if (w.changed.wait_until(lock, deadline) == std::cv_status::timeout) break;
    ++wakeups_;
  }
  if (--w.count == 0) waiting_.erase(key);
  return data_.count(key) > 0;
}

void TcpStoreServer::notify_key(const std::string& key) {  // the lock held
  const auto it = waiting_.find(key);
  if (it != waiting_.end()) it->second.changed.notify_all();
}

}  // namespace cg::dist
