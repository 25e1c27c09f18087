// Connects a rank's Gloo context to every other rank of the job: Gloo's connectFullMesh, with our
// bounds and our errors. Gloo's own waits up to 5 x the timeout for a pair to connect (300 s at
// dist.timeout_s=60), while the peer it waits for may have failed long ago on another node; and
// its errors name an address but neither rank. Here each rank publishes its pairs' addresses under
// "gloo/<rank>" in the store and every wait, for a peer's addresses or for its connection, ends
// within the timeout with a cg::Error naming this rank, the peer, the address dialed and
// GLOO_SOCKET_IFNAME, the way to advertise another one (dist/advertised_address.h).
#pragma once
#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>

#include <chrono>
#include <memory>
#include <string>

#include "dist/tcp_store.h"

namespace cg::dist {

// `key_prefix` keeps a subgroup's addresses apart from the job's (dist.sharding=hybrid_shard's
// node and replica groups): its keys are "<key_prefix>gloo/<rank>", rank within the group.
std::shared_ptr<gloo::rendezvous::Context> connect_full_mesh(TcpStore& store,
                                                             const std::shared_ptr<gloo::transport::Device>& device,
                                                             int rank, int world_size, std::chrono::milliseconds timeout,
                                                             const std::string& key_prefix = "");

}  // namespace cg::dist
