#include "dist/advertised_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <set>

#include "util/check.h"

namespace cg::dist {

std::string local_address_of_socket(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw Error(fmt::format("getsockname on the rendezvous connection: {}", std::strerror(errno)));
  char text[INET6_ADDRSTRLEN] = {};
  const void* raw = addr.ss_family == AF_INET6 ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6&>(addr).sin6_addr)
                                                : static_cast<const void*>(&reinterpret_cast<sockaddr_in&>(addr).sin_addr);
  if (!::inet_ntop(addr.ss_family, raw, text, sizeof(text)))
    throw Error(fmt::format("inet_ntop on the rendezvous connection's address: {}", std::strerror(errno)));
  return text;
}

std::string ipv4_address_of_interface(const std::string& name) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) throw Error(fmt::format("getifaddrs: {}", std::strerror(errno)));
  const std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> owner(list, ::freeifaddrs);
  std::set<std::string> with_ipv4;
  bool exists = false;
  for (const ifaddrs* i = list; i; i = i->ifa_next) {
    const bool ipv4 = i->ifa_addr && i->ifa_addr->sa_family == AF_INET;
    exists = exists || name == i->ifa_name;
    if (!ipv4) continue;
    with_ipv4.insert(i->ifa_name);
    if (name != i->ifa_name) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof(text));
    return text;
  }
  std::string names;
  for (const auto& n : with_ipv4) names += (names.empty() ? "" : ", ") + n;
  throw Error(fmt::format("GLOO_SOCKET_IFNAME={}: {} (interfaces with an IPv4 address: {})", name,
                          exists ? "that interface has no IPv4 address" : "no such network interface", names));
}

std::string address_to_advertise(const std::string& store_local_address, const EnvLookup& env) {
  const std::optional<std::string> ifname = env("GLOO_SOCKET_IFNAME");
  if (!ifname || ifname->empty()) return store_local_address;
  // PyTorch accepts a list and opens a device per interface; one transport device is all we have.
  if (ifname->find(',') != std::string::npos)
    throw UsageError(fmt::format("GLOO_SOCKET_IFNAME={}: name one interface (cudagrad does not spread a group "
                                 "over several)", *ifname));
  return ipv4_address_of_interface(*ifname);
}

}  // namespace cg::dist
