#include "dist/tcp_store.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>

#include "dist/advertised_address.h"
#include "dist/socket_deadline.h"
#include "dist/tcp_store_protocol.h"
#include "util/check.h"

namespace cg::dist {
namespace {

using namespace store_protocol;

// Sends or receives exactly n bytes; false when the peer closed or the socket failed.
bool send_all(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= size_t(k);
  }
  return true;
}
bool recv_all(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = ::recv(fd, p, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= size_t(k);
  }
  return true;
}

// How long after its timeout a get's answer may still arrive (network and scheduling delay).
constexpr std::chrono::seconds kReplyMargin{5};

bool send_blob(int fd, const std::vector<char>& v) {
  const uint32_t n = uint32_t(v.size());
  return send_all(fd, &n, 4) && send_all(fd, v.data(), v.size());
}

}  // namespace

// The server: a listening socket and one thread per connected rank (world sizes are small).
class TcpStoreServer {
 public:
  explicit TcpStoreServer(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    CG_CHECK(fd_ >= 0, "rendezvous store: socket(): {}", std::strerror(errno));
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(uint16_t(port));
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd_, 128) != 0) {
      const int err = errno;
      ::close(fd_);
      throw Error(fmt::format("rendezvous store: cannot listen on port {}: {} (is another job using "
                              "MASTER_PORT={}?)", port, std::strerror(err), port));
    }
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  ~TcpStoreServer() {
    stopping_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    acceptor_.join();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (int c : clients_) ::shutdown(c, SHUT_RDWR);
    }
    changed_.notify_all();
    for (auto& t : handlers_) t.join();
  }

 private:
  void accept_loop() {
    while (!stopping_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      int one = 1;
      ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      std::lock_guard<std::mutex> lock(mutex_);
      clients_.push_back(c);
      handlers_.emplace_back([this, c] { serve(c); });
    }
  }

  void serve(int c) {
    const ReadExact read = [c](void* dst, size_t n) { return recv_all(c, dst, n); };
    while (!stopping_) {
      Request req;
      std::string why;
      const ReadResult got = read_request(read, req, why);
      if (got == ReadResult::malformed)
        std::fprintf(stderr, "rendezvous store: dropping a client that sent a malformed request: %s\n",
                     why.c_str());
      if (got != ReadResult::ok) break;
      if (req.op == kSet) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          data_[req.key] = std::move(req.value);
        }
        changed_.notify_all();
        const uint8_t ok = kOk;
        if (!send_all(c, &ok, 1)) break;
      } else if (req.op == kGet) {
        std::unique_lock<std::mutex> lock(mutex_);
        const bool found = changed_.wait_for(lock, std::chrono::milliseconds(req.number),
                                             [&] { return stopping_ || data_.count(req.key) > 0; });
        const uint8_t status = found && data_.count(req.key) ? kOk : kTimeout;
        std::vector<char> reply = status == kOk ? data_[req.key] : std::vector<char>();
        lock.unlock();
        if (!send_all(c, &status, 1) || !send_blob(c, reply)) break;
      } else {  // kAdd
        int64_t now = 0;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          now = add_to_slot(data_[req.key], req.number);
        }
        changed_.notify_all();
        if (!send_all(c, &now, 8)) break;
      }
    }
    ::close(c);
  }

  int fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<char>> data_;
  std::vector<int> clients_;
  std::vector<std::thread> handlers_;
};

TcpStore::TcpStore(const TcpStoreOptions& options) : options_(options) {
  if (options.is_server) server_ = std::make_unique<TcpStoreServer>(options.port);
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  const int rc = ::getaddrinfo(options.host.c_str(), std::to_string(options.port).c_str(), &hints, &res);
  if (rc != 0)
    throw Error(fmt::format("rendezvous: cannot resolve MASTER_ADDR '{}': {}", options.host, ::gai_strerror(rc)));
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  std::string last_error;
  while (true) {
    fd_ = connect_before(*res, deadline, last_error);
    if (fd_ >= 0 || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // rank 0 may not be up yet
  }
  ::freeaddrinfo(res);
  if (fd_ < 0)
    throw Error(fmt::format("rendezvous: could not reach the store at {}:{} within {} s ({}); is rank 0 "
                            "running and MASTER_ADDR/MASTER_PORT right?",
                            options.host, options.port, options.timeout.count() / 1000.0, last_error));
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  // A send blocks only on a full socket buffer, i.e. when the store stopped reading for this long.
  timeval tv{};
  tv.tv_sec = time_t(options.timeout.count() / 1000);
  tv.tv_usec = suseconds_t(options.timeout.count() % 1000 * 1000);
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

std::string TcpStore::local_address() const { return local_address_of_socket(fd_); }

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
  server_.reset();
}

std::vector<char> TcpStore::request(uint8_t op, const std::string& key, const std::vector<char>& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::vector<char> message = encode_request(op, key, value);
  if (!send_all(fd_, message.data(), message.size()))
    throw Error(fmt::format("rendezvous: lost the connection to the store at {}:{} (did rank 0 exit?)",
                            options_.host, options_.port));
  // The store answers a get when its wait (the timeout) is over, a set or an add at once; no
  // answer a margin later means the network to rank 0's node or rank 0 itself stalled.
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout + kReplyMargin;
  auto receive = [&](void* data, size_t n) {
    const Received got = recv_before(fd_, data, n, deadline);
    if (got == Received::ok) return;
    if (got == Received::closed)
      throw Error(fmt::format("rendezvous: lost the connection to the store at {}:{} while waiting for '{}' "
                              "(did rank 0 exit?)", options_.host, options_.port, key));
    throw Error(fmt::format("rendezvous: no answer from the store at {}:{} within {} s while waiting for '{}' "
                            "(the network to rank 0's node is down, or rank 0 stalled)", options_.host,
                            options_.port, double((options_.timeout + kReplyMargin).count()) / 1000.0, key));
  };
  if (op == kSet) {
    uint8_t ok;
    receive(&ok, 1);
    return {};
  }
  if (op == kAdd) {
    std::vector<char> out(8);
    receive(out.data(), 8);
    return out;
  }
  uint8_t status;
  uint32_t n = 0;
  receive(&status, 1);
  receive(&n, 4);
  if (n > kMaxValueBytes) throw Error(fmt::format("rendezvous: the store sent a {}-byte value for '{}'", n, key));
  std::vector<char> out(n);
  receive(out.data(), n);
  if (status != kOk)
    throw Error(fmt::format("rendezvous: timed out after {} s waiting for '{}' (a rank did not join or died)",
                            options_.timeout.count() / 1000.0, key));
  return out;
}

void TcpStore::set(const std::string& key, const std::vector<char>& value) { request(kSet, key, value); }
void TcpStore::set(const std::string& key, const std::string& value) {
  set(key, std::vector<char>(value.begin(), value.end()));
}

std::vector<char> TcpStore::get(const std::string& key) {
  std::vector<char> timeout(8);
  const int64_t ms = options_.timeout.count();
  std::memcpy(timeout.data(), &ms, 8);
  return request(kGet, key, timeout);
}

std::string TcpStore::get_string(const std::string& key) {
  const std::vector<char> v = get(key);
  return std::string(v.begin(), v.end());
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  std::vector<char> v(8);
  std::memcpy(v.data(), &delta, 8);
  const std::vector<char> out = request(kAdd, key, v);
  int64_t now;
  std::memcpy(&now, out.data(), 8);
  return now;
}

void TcpStore::barrier(const std::string& name, int count) {
  const std::string key = fmt::format("barrier/{}/{}", name, barrier_generation_++);
  if (add(key, 1) == count) set(key + "/done", std::string("1"));
  try {
    get(key + "/done");
  } catch (const Error& e) {
    throw Error(fmt::format("barrier '{}' was not reached by all {} ranks: {}", name, count, e.what()));
  }
}

}  // namespace cg::dist
