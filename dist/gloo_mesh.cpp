#include "dist/gloo_mesh.h"

#include <gloo/transport/tcp/address.h>

#include <algorithm>
#include <exception>

#include "util/check.h"

namespace cg::dist {
namespace {

// connectFullMesh's steps, in a subclass because the context's transport members are protected.
class MeshContext : public gloo::rendezvous::Context {
 public:
  MeshContext(int rank, int size, std::chrono::milliseconds timeout, std::string key_prefix)
      : Context(rank, size), timeout_ms_(timeout), prefix_(std::move(key_prefix)) {
    setTimeout(timeout);
  }

  void connect(TcpStore& store, const std::shared_ptr<gloo::transport::Device>& device) {
    auto pairs = device->createContext(rank, size);
    // A pair waits 5 x its timeout to connect (tcp/pair.h: "a longer timeout when waiting for
    // initial connect"); a fifth of ours keeps that wait within dist.timeout_s. Afterwards the
    // pairs' own timeout is unused: every collective passes ours (ProcessGroup's options).
    pairs->setTimeout(std::max(std::chrono::milliseconds(1), timeout_ms_ / 5));
    std::vector<char> mine;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      const std::vector<char> bytes = pairs->createPair(peer)->address().bytes();
      mine.insert(mine.end(), bytes.begin(), bytes.end());
    }
    store.set(prefix_ + "gloo/" + std::to_string(rank), mine);
    for (int peer = 0; peer < size; ++peer)
      if (peer != rank) connect_pair(store, *pairs, peer);
    device_ = device;
    transportContext_ = std::move(pairs);
  }

 private:
  void connect_pair(TcpStore& store, gloo::transport::Context& pairs, int peer) {
    std::vector<char> theirs;
    try {
      theirs = store.get(prefix_ + "gloo/" + std::to_string(peer));
    } catch (const Error& e) {
      throw Error(fmt::format("rank {}: rank {} never published its address for the process group (it did not "
                              "start, or failed before joining): {}", rank, peer, e.what()));
    }
    // Rank `peer` lists one address per other rank, in rank order without itself.
    const size_t each = theirs.size() / size_t(size - 1);
    const size_t slot = size_t(rank > peer ? rank - 1 : rank);
    const std::vector<char> address(theirs.begin() + long(slot * each), theirs.begin() + long((slot + 1) * each));
    const std::string where = gloo::transport::tcp::Address(address).str();
    try {
      pairs.getPair(peer)->connect(address);
    } catch (const std::exception& e) {
      throw Error(fmt::format("rank {}: could not connect to rank {} at {} within {} s: {}. Each rank advertises "
                              "the address of its interface toward MASTER_ADDR; when that one is not reachable "
                              "from the other nodes, set GLOO_SOCKET_IFNAME to the interface to use", rank, peer,
                              where, timeout_ms_.count() / 1000.0, e.what()));
    }
  }

  std::chrono::milliseconds timeout_ms_;
  std::string prefix_;
};

}  // namespace

std::shared_ptr<gloo::rendezvous::Context> connect_full_mesh(TcpStore& store,
                                                             const std::shared_ptr<gloo::transport::Device>& device,
                                                             int rank, int world_size, std::chrono::milliseconds timeout,
                                                             const std::string& key_prefix) {
  auto context = std::make_shared<MeshContext>(rank, world_size, timeout, key_prefix);
  context->connect(store, device);
  return context;
}

}  // namespace cg::dist
