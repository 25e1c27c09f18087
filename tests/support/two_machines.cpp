#include "support/two_machines.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <algorithm>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace cg::test {
namespace {

constexpr const char* kPrefix = "cgtest-";

// Each node's end of the veth pair (interface names are per namespace: every instance has these).
std::string link_of(int node) { return node == 0 ? "cgnet0" : "cgnet1"; }

// Runs `command` through the shell, its output discarded; throws naming it when it fails.
void run_or_throw(const std::string& command) {
  if (std::system((command + " > /dev/null 2>&1").c_str()) != 0)
    throw std::runtime_error("failed: " + command);
}

// Namespaces named cgtest-<pid>-<n> whose test process is gone (it was killed before its
// destructor ran) are deleted, so that killed runs do not pile them up.
void delete_abandoned_namespaces() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/var/run/netns", ec)) {
    const std::string name = e.path().filename();
    if (name.rfind(kPrefix, 0) != 0) continue;
    const pid_t owner = pid_t(std::atol(name.c_str() + std::strlen(kPrefix)));
    if (owner > 0 && ::kill(owner, 0) != 0 && errno == ESRCH)
      std::system(("ip netns delete " + name + " > /dev/null 2>&1").c_str());
  }
}

}  // namespace

std::string TwoMachines::unavailable() {
  if (::geteuid() != 0) return "needs root to create network namespaces";
  if (std::system("command -v ip > /dev/null 2>&1") != 0) return "needs the ip command (iproute2)";
  const std::string probe = std::string(kPrefix) + std::to_string(::getpid()) + "-probe";
  if (std::system(("ip netns add " + probe + " > /dev/null 2>&1").c_str()) != 0)
    return "'ip netns add' fails here (no network namespaces in this container?)";
  std::system(("ip netns delete " + probe + " > /dev/null 2>&1").c_str());
  return "";
}

std::string TwoMachines::iptables_unavailable() {
  if (std::system("command -v iptables > /dev/null 2>&1") != 0)
    return "needs iptables (scripts/install_deps.sh --for-tests installs it)";
  return "";
}

TwoMachines::TwoMachines() {
  static std::atomic<int> counter{0};
  delete_abandoned_namespaces();
  const std::string stem = std::string(kPrefix) + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  names_ = {stem + "-a", stem + "-b"};
  try {
    for (const auto& n : names_) run_or_throw("ip netns add " + n);
    run_or_throw("ip link add " + link_of(0) + " netns " + names_[0] + " type veth peer name " + link_of(1) +
                 " netns " + names_[1]);
    for (int node = 0; node < 2; ++node) {
      const std::string ip = "ip -n " + names_[size_t(node)], dev = " dev " + link_of(node);
      run_or_throw(ip + " addr add " + address(node) + "/24" + dev);
      run_or_throw(ip + " link set lo up");
      run_or_throw(ip + " link set" + dev + " up");
    }
  } catch (...) {
    for (const auto& n : names_) std::system(("ip netns delete " + n + " > /dev/null 2>&1").c_str());
    throw;
  }
}

TwoMachines::~TwoMachines() {
  for (const auto& n : names_)
    if (std::system(("ip netns delete " + n + " > /dev/null 2>&1").c_str()) != 0)
      std::fprintf(stderr, "TwoMachines: could not delete network namespace %s\n", n.c_str());
}

std::string TwoMachines::on(int node, const std::string& command) const {
  return "ip netns exec " + names_[size_t(node)] + " " + command;
}

void TwoMachines::drop_incoming(int node, double probability) const {
  run_or_throw(on(node, "iptables -A INPUT -i " + link_of(node) + " -m statistic --mode random --probability " +
                            std::to_string(probability) + " -j DROP"));
}

void TwoMachines::cut(int node) const {
  run_or_throw(on(node, "iptables -A INPUT -i " + link_of(node) + " -j DROP"));
  run_or_throw(on(node, "iptables -A OUTPUT -o " + link_of(node) + " -j DROP"));
}

void TwoMachines::heal(int node) const { run_or_throw(on(node, "iptables -F")); }

namespace {
// The standard output of `command`.
std::string output_of(const std::string& command) {
  std::string out;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), p)) > 0;) out.append(buffer, n);
    ::pclose(p);
  }
  return out;
}
}  // namespace

long long TwoMachines::dropped_packets(int node) const {
  // One line per rule: "pkts bytes target ..."; the DROP rules' packet counts, summed.
  const std::string table = output_of(on(node, "iptables -L -v -x -n") + " 2>/dev/null");
  long long dropped = -1;
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    long long packets = 0, bytes = 0;
    std::string target;
    if (fields >> packets >> bytes >> target && target == "DROP") dropped = std::max(dropped, 0LL) + packets;
  }
  return dropped;
}

long long TwoMachines::retransmitted_segments(int node) const {
  // /proc/net/snmp: a "Tcp:" line of names, then a "Tcp:" line of values.
  std::istringstream lines(output_of(on(node, "cat /proc/net/snmp")));
  std::vector<std::string> names;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("Tcp:", 0) != 0) continue;
    std::istringstream fields(line.substr(4));
    std::vector<std::string> row{std::istream_iterator<std::string>(fields), std::istream_iterator<std::string>()};
    if (names.empty()) {
      names = row;
      continue;
    }
    for (size_t i = 0; i < names.size() && i < row.size(); ++i)
      if (names[i] == "RetransSegs") return std::stoll(row[i]);
  }
  return -1;
}

}  // namespace cg::test
