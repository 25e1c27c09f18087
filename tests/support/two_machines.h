// Two "machines" on this one, for multi-node tests: two network namespaces joined by a veth pair,
// node 0 at 10.77.0.1/24 and node 1 at 10.77.0.2/24 (addresses that exist only inside the two
// namespaces, so nothing outside them is touched or reachable). A command runs on a node through
// `ip netns exec`; the link can lose packets at random or be cut (iptables inside a namespace).
// The namespaces have names unique to the test process and are deleted by the destructor, with
// the veth pair and the iptables rules they hold; ones left by a test process that was killed
// are removed by the next one.
// Needs root and `ip netns`; unavailable() says why not when they are missing, for GTEST_SKIP.
#pragma once
#include <array>
#include <cstdint>
#include <string>

namespace cg::test {

class TwoMachines {
 public:
  // "" when namespaces can be made here, else why not.
  static std::string unavailable();
  // "" when iptables works inside a namespace, else why not.
  static std::string iptables_unavailable();

  TwoMachines();  // throws std::runtime_error naming the command that failed
  ~TwoMachines();
  TwoMachines(const TwoMachines&) = delete;
  TwoMachines& operator=(const TwoMachines&) = delete;

  static std::string address(int node) { return node == 0 ? "10.77.0.1" : "10.77.0.2"; }
  const std::string& namespace_name(int node) const { return names_[size_t(node)]; }
  // `command` as a shell command that runs it on `node`.
  std::string on(int node, const std::string& command) const;

  // Node `node` drops each incoming packet with this probability (0 < p <= 1).
  void drop_incoming(int node, double probability) const;
  // Node `node` drops every packet in and out on the link: the two are cut apart.
  void cut(int node) const;
  // Removes node `node`'s packet rules: the link is whole again.
  void heal(int node) const;
  // Packets node `node`'s rules have dropped so far (iptables' counters; -1 when unreadable).
  long long dropped_packets(int node) const;
  // TCP segments node `node` has retransmitted so far (RetransSegs of its /proc/net/snmp).
  long long retransmitted_segments(int node) const;

 private:
  std::array<std::string, 2> names_;
};

}  // namespace cg::test
