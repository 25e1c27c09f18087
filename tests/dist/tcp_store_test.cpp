// The rendezvous store: set/get/add/barrier across clients, and timeouts that name what was
// awaited instead of hanging.
#include <gtest/gtest.h>

#include <thread>

#include "dist/tcp_store.h"
#include "support/free_port.h"
#include "util/check.h"

namespace cg::dist {
namespace {

TcpStoreOptions options(int port, bool server, int timeout_ms = 5000) {
  TcpStoreOptions o;
  o.port = port;
  o.is_server = server;
  o.timeout = std::chrono::milliseconds(timeout_ms);
  return o;
}

TEST(TcpStore, SetGetAddAndBarrierAcrossClients) {
  const int port = test::free_port();
  TcpStore server(options(port, true));
  std::vector<std::thread> ranks;
  std::vector<std::string> seen(3);
  for (int r = 1; r <= 3; ++r)
    ranks.emplace_back([&, r] {
      TcpStore client(options(port, false));
      client.set("hello/" + std::to_string(r), "rank" + std::to_string(r));
      client.add("count", 1);
      client.barrier("start", 4);
      seen[size_t(r - 1)] = client.get_string("hello/" + std::to_string(r % 3 + 1));
    });
  server.barrier("start", 4);
  for (auto& t : ranks) t.join();
  EXPECT_EQ(server.add("count", 0), 3);
  EXPECT_EQ(seen[0], "rank2");
  EXPECT_EQ(seen[2], "rank1");
}

TEST(TcpStore, GetTimesOutNamingTheKey) {
  const int port = test::free_port();
  TcpStore server(options(port, true, 300));
  try {
    server.get("never/set");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("never/set"), std::string::npos) << e.what();
  }
}

TEST(TcpStore, BarrierWithAMissingRankFails) {
  const int port = test::free_port();
  TcpStore server(options(port, true, 300));
  try {
    server.barrier("join", 2);  // rank 1 never comes
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("join"), std::string::npos) << e.what();
  }
}

TEST(TcpStore, NoServerMeansAClearConnectError) {
  const int port = test::free_port();
  try {
    TcpStore client(options(port, false, 300));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(port)), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cg::dist
