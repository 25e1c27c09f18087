#include "dist/tcp_store.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "dist/advertised_address.h"
#include "dist/socket_deadline.h"
#include "dist/socket_io.h"
#include "dist/tcp_store_server.h"
#include "dist/tcp_store_protocol.h"
#include "util/check.h"

namespace cg::dist {
namespace {

using namespace store_protocol;

// How long after its timeout a get's answer may still arrive (network and scheduling delay).
constexpr std::chrono::seconds kReplyMargin{5};

}  // namespace

TcpStore::TcpStore(const TcpStoreOptions& options) : options_(options) {
  if (options.is_server)
    server_ = std::make_unique<TcpStoreServer>(options.port, options.expected_clients, options.job_token);
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
  if (!options.job_token.empty()) say_hello();
}

// The job token, first: a store of another job answers kWrongJob (and a store without a token, kOk).
void TcpStore::say_hello() {
  const std::vector<char> reply = request(kHello, options_.job_token, {});
  if (reply.empty() || uint8_t(reply[0]) != kOk) {
    ::close(fd_);
    fd_ = -1;
    server_.reset();
    throw Error(fmt::format("rendezvous: the store at {}:{} belongs to another job (its job token differs from this "
                            "rank's CUDAGRAD_JOB_TOKEN): is an earlier job still running with MASTER_PORT={}, or "
                            "was this rank started by another launcher?",
                            options_.host, options_.port, options_.port));
  }
}

// On rank 0, a store that stopped (out of descriptors) is the cause of a lost connection: say so.
void TcpStore::throw_if_server_failed() const {
  if (!server_) return;
  const std::string why = server_->failure();
  if (!why.empty()) throw Error(why);
}

std::string TcpStore::local_address() const { return local_address_of_socket(fd_); }

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
  server_.reset();
}

std::vector<char> TcpStore::request(uint8_t op, const std::string& key, const std::vector<char>& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::vector<char> message = encode_request(op, key, value);
  if (!send_all(fd_, message.data(), message.size())) {
    throw_if_server_failed();
    throw Error(fmt::format("rendezvous: lost the connection to the store at {}:{} (did rank 0 exit?)",
                            options_.host, options_.port));
  }
  // The store answers a get when its wait (the timeout) is over, a set or an add at once; no
  // answer a margin later means the network to rank 0's node or rank 0 itself stalled.
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout + kReplyMargin;
  auto receive = [&](void* data, size_t n) {
    const Received got = recv_before(fd_, data, n, deadline);
    if (got == Received::ok) return;
    throw_if_server_failed();
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
  if (op == kHello) {
    std::vector<char> status(1);
    receive(status.data(), 1);
    return status;
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
