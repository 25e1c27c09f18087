// The address a rank gives its peers for the process group's connections (Gloo's transport).
// Not the host name: on a stock Debian host it resolves to 127.0.1.1, in a container or network
// namespace often to 127.0.0.1, and a peer on another machine then dials its own loopback. As
// PyTorch does, a rank advertises the local address of its connection to the rendezvous store,
// which is the interface that reaches MASTER_ADDR; GLOO_SOCKET_IFNAME=<interface> picks another
// (that interface's IPv4 address). NCCL has its own NCCL_SOCKET_IFNAME, read by NCCL itself.
#pragma once
#include <string>

#include "dist/identity.h"

namespace cg::dist {

// The numeric local address (e.g. "10.0.0.2") of the connected socket `fd`.
std::string local_address_of_socket(int fd);

// The IPv4 address of network interface `name`; cg::Error when there is no such interface or it
// has no IPv4 address, naming the interfaces that have one.
std::string ipv4_address_of_interface(const std::string& name);

// GLOO_SOCKET_IFNAME's interface address when the variable is set, else `store_local_address`.
std::string address_to_advertise(const std::string& store_local_address, const EnvLookup& env = process_env);

}  // namespace cg::dist
