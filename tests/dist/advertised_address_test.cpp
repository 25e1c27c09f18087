// The address a rank advertises to its peers: the store connection's local end unless
// GLOO_SOCKET_IFNAME names an interface, whose IPv4 address it then is; a bad name fails clearly.
#include <gtest/gtest.h>

#include <map>

#include "dist/advertised_address.h"
#include "util/check.h"

namespace cg::dist {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

TEST(AdvertisedAddress, IsTheStoreConnectionsAddressByDefault) {
  EXPECT_EQ(address_to_advertise("10.1.2.3", env_of({})), "10.1.2.3");
  EXPECT_EQ(address_to_advertise("10.1.2.3", env_of({{"GLOO_SOCKET_IFNAME", ""}})), "10.1.2.3");
  // NCCL's variable is NCCL's: it does not move Gloo's address.
  EXPECT_EQ(address_to_advertise("10.1.2.3", env_of({{"NCCL_SOCKET_IFNAME", "lo"}})), "10.1.2.3");
}

TEST(AdvertisedAddress, GlooSocketIfnameTakesThatInterfacesAddress) {
  EXPECT_EQ(ipv4_address_of_interface("lo"), "127.0.0.1");
  EXPECT_EQ(address_to_advertise("10.1.2.3", env_of({{"GLOO_SOCKET_IFNAME", "lo"}})), "127.0.0.1");
}

TEST(AdvertisedAddress, AnUnknownInterfaceFailsNamingItAndTheOnesThatExist) {
  try {
    address_to_advertise("10.1.2.3", env_of({{"GLOO_SOCKET_IFNAME", "nosuch9"}}));
    FAIL() << "an unknown interface was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("GLOO_SOCKET_IFNAME=nosuch9: no such network interface"), std::string::npos) << what;
    EXPECT_NE(what.find("lo"), std::string::npos) << what;
  }
}

TEST(AdvertisedAddress, AListOfInterfacesIsRefused) {
  EXPECT_THROW(address_to_advertise("10.1.2.3", env_of({{"GLOO_SOCKET_IFNAME", "eth0,eth1"}})), UsageError);
}

}  // namespace
}  // namespace cg::dist
