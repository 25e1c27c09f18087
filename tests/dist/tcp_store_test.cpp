// The rendezvous store: set/get/add/barrier across clients, and timeouts that name what was
// awaited instead of hanging.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <future>
#include <memory>
#include <thread>

#include "dist/tcp_store.h"
#include "dist/tcp_store_server.h"
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

// A store that accepts the connection and then never answers (what a client sees when the network
// to rank 0's node drops every packet): a request ends a few seconds after the timeout, naming
// the key, instead of waiting on the socket for ever.
TEST(TcpStore, AStoreThatGoesSilentEndsTheWaitNamingTheKey) {
  const int port = test::free_port();
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);  // listens, never accepts, never answers
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(uint16_t(port));
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  ASSERT_EQ(::listen(silent, 4), 0);
  // The request runs on a thread of its own, so that a wait without end fails this test instead of
  // hanging it (the thread is then left behind, blocked, until the test program exits).
  auto outcome = std::make_shared<std::promise<std::string>>();
  std::future<std::string> result = outcome->get_future();
  std::thread([port, outcome] {
    try {
      TcpStore client(options(port, false, 500));
      client.get("config/0");
      outcome->set_value("a silent store answered");
    } catch (const Error& e) {
      outcome->set_value(e.what());
    }
  }).detach();
  ASSERT_EQ(result.wait_for(std::chrono::seconds(15)), std::future_status::ready) << "the wait did not end";
  const std::string what = result.get();
  EXPECT_NE(what.find("no answer from the store"), std::string::npos) << what;
  EXPECT_NE(what.find("config/0"), std::string::npos) << what;
  ::close(silent);
}

// A client whose request breaks the format is dropped (its connection closed) without the store
// allocating what it asks for; the store goes on serving the others.
TEST(TcpStore, AMalformedRequestDropsThatClientOnly) {
  const int port = test::free_port();
  TcpStore server(options(port, true));
  const int bad = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(uint16_t(port));
  ASSERT_EQ(::connect(bad, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << std::strerror(errno);
  const char request[] = {9, 0, 0, 0, 0, 0, 0, 0, 0};  // op 9 does not exist
  ASSERT_EQ(::send(bad, request, sizeof(request), 0), ssize_t(sizeof(request)));
  char byte;
  EXPECT_LE(::recv(bad, &byte, 1, 0), 0);  // closed (or reset: bytes were left unread), no answer
  ::close(bad);
  server.set("still", std::string("serving"));
  EXPECT_EQ(server.get_string("still"), "serving");
}

// A rank that leaves closes its connection; the store must forget that descriptor, whose number
// the process may reuse at once: stopping the store must not shut down what now has it.
TEST(TcpStore, AClosedConnectionsDescriptorIsNotShutDownWhenTheStoreStops) {
  const int port = test::free_port();
  auto server = std::make_unique<TcpStore>(options(port, true));
  {
    TcpStore client(options(port, false));
    client.set("k", std::string("v"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the server's end gets closed
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);  // takes the lowest free numbers
  server.reset();
  EXPECT_EQ(::send(pair[0], "x", 1, MSG_NOSIGNAL), 1) << "the store shut down a descriptor it had closed";
  ::close(pair[0]);
  ::close(pair[1]);
}

// The address a rank advertises is its end of the store connection: loopback for a loopback store.
TEST(TcpStore, LocalAddressIsThisEndOfTheConnection) {
  const int port = test::free_port();
  TcpStore server(options(port, true));
  EXPECT_EQ(server.local_address(), "127.0.0.1");
}

// Issue 38: a client of another job (a rank of an earlier job still retrying the same port) is
// refused with an error naming the cause, instead of joining this job's rendezvous.
TEST(TcpStore, AClientOfAnotherJobIsRefusedNamingTheCause) {
  const int port = test::free_port();
  TcpStoreOptions mine = options(port, true);
  mine.job_token = "job-a";
  TcpStore server(mine);
  TcpStoreOptions same = options(port, false), stranger = options(port, false), untokened = options(port, false);
  same.job_token = "job-a";
  stranger.job_token = "job-b";
  TcpStore colleague(same);
  colleague.set("k", "v");
  EXPECT_EQ(server.get_string("k"), "v");
  try {
    TcpStore client(stranger);
    FAIL() << "a client of another job joined";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("belongs to another job"), std::string::npos) << e.what();
  }
  TcpStore silent(untokened);  // says no token: its first request is refused
  EXPECT_THROW(silent.set("k", "overwritten"), Error);
  EXPECT_EQ(server.get_string("k"), "v");
}

// Each connection's thread is joined once its client has gone (they used to pile up until the
// store stopped): after 40 clients came and went, at most a couple are left unjoined.
TEST(TcpStore, TheThreadsOfFinishedClientsAreJoined) {
  const int port = test::free_port();
  TcpStoreServer server(port, 0);
  for (int i = 0; i < 40; ++i) {
    TcpStore client(options(port, false));
    client.set("k" + std::to_string(i), "v");
  }
  TcpStore last(options(port, false));  // each accept first joins the threads that have finished
  last.set("last", "v");
  EXPECT_LE(server.handler_threads(), 3u);
}

// A client that would store more keys than the limit is dropped; the keys already stored stay.
TEST(TcpStore, KeysPastTheLimitDropTheClient) {
  const int port = test::free_port();
  TcpStoreServer server(port, 0, "", /*max_keys=*/8);
  TcpStore client(options(port, false));
  for (int i = 0; i < 8; ++i) client.set("k" + std::to_string(i), "v");
  client.set("k0", "again");  // an existing key is no new key
  EXPECT_THROW(client.set("k8", "v"), Error);
  TcpStore other(options(port, false));
  EXPECT_EQ(other.get_string("k0"), "again");
}

}  // namespace
}  // namespace cg::dist
