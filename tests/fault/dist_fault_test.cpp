// Distributed faults with real processes: a rank stopped (SIGSTOP) in the middle of training, the
// rendezvous port already taken, a rank that joins late or whose rank 0 never comes up, and ranks
// started with different configs or different binaries. Each must end in a clear error naming the
// cause (or, for a late rank inside the timeout, in a normal run), never in a hang.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <filesystem>
#include <regex>

#include "support/free_port.h"
#include "support/processes.h"

namespace cg {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string train_args(const fs::path& out, const std::string& extra = "") {
  return "data.dataset=synthetic data.synthetic_size=128 data.image_size=8 data.batch_size=16 data.num_workers=0 "
         "model.in_channels=3 model.widths=[4,8] model.blocks=[1,1] train.epochs=1 train.log_interval=1 "
         "train.device=cpu train.threads=1 output.dir=" + out.string() + " " + extra;
}

// One rank started by hand, the way mpirun or a scheduler would.
std::string rank_cmd(int rank, int port, const std::string& binary, const std::string& args) {
  return "env RANK=" + std::to_string(rank) + " WORLD_SIZE=2 LOCAL_RANK=" + std::to_string(rank) +
         " LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " + binary + " " + args;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

TEST(FaultDist, AStoppedRankIsNamedByItsPeerWithinTheTimeout) {
  const auto dir = test::make_temp_dir("fault_stop");
  const std::string marker = (dir / "out").string();
  const pid_t pid = test::start(test::app("cudagrad-launch") + " --standalone --nproc-per-node 2 --grace-seconds 2 " +
                                    test::app("cudagrad-train") + " " +
                                    train_args(dir / "out", "train.epochs=100000 dist.timeout_s=5"),
                                dir / "log.txt");
  pid_t victim = -1;
  for (int i = 0; i < 1200 && victim < 0; ++i) {
    if (test::read_text(dir / "log.txt").find("epoch 1 step 2 ") != std::string::npos) victim = test::find_rank(marker, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(victim, 0) << test::read_text(dir / "log.txt");
  kill(victim, SIGSTOP);  // frozen mid-step: alive, connected, silent
  const auto t0 = Clock::now();
  const int rc = test::wait_for(pid, std::chrono::seconds(90));
  const double seconds = seconds_since(t0);
  const std::string log = test::read_text(dir / "log.txt");
  EXPECT_NE(rc, 0) << log;
  EXPECT_NE(rc, -1) << "the launcher hung\n" << log;
  // dist.timeout_s (5) + the launcher's grace (2) + start-up slack on a loaded machine.
  EXPECT_LT(seconds, 30.0) << log;
  // Rank 0 names itself, the collective that stalled and the rank it was waiting for.
  EXPECT_TRUE(std::regex_search(log, std::regex("rank 0: (all_reduce|broadcast|all_gather|barrier)[^\n]*failed")))
      << log;
  EXPECT_NE(log.find("rank 1 did not take part"), std::string::npos) << log;
  EXPECT_EQ(test::processes_with(marker), 0) << "ranks left behind";
}

TEST(FaultDist, RendezvousPortAlreadyTaken) {
  const auto dir = test::make_temp_dir("fault_port");
  // Another job holds the port.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  const std::string marker = (dir / "out").string();
  const auto t0 = Clock::now();
  const int rc = test::wait_for(
      test::start(test::app("cudagrad-launch") + " --nproc-per-node 2 --master-port " + std::to_string(port) + " " +
                      test::app("cudagrad-train") + " " + train_args(dir / "out", "dist.timeout_s=5"),
                  dir / "log.txt"),
      std::chrono::seconds(60));
  ::close(fd);
  const std::string log = test::read_text(dir / "log.txt");
  EXPECT_NE(rc, 0) << log;
  EXPECT_NE(rc, -1) << log;
  EXPECT_LT(seconds_since(t0), 30.0) << log;
  EXPECT_NE(log.find("cannot listen on port " + std::to_string(port)), std::string::npos) << log;
  EXPECT_EQ(test::processes_with(marker), 0);
}

TEST(FaultDist, ARankJoiningLateInsideTheTimeoutTrainsNormally) {
  const auto dir = test::make_temp_dir("fault_late");
  const int port = test::free_port();
  const std::string args = train_args(dir / "out", "dist.timeout_s=30");
  const pid_t r0 = test::start(rank_cmd(0, port, test::app("cudagrad-train"), args), dir / "rank0.log");
  std::this_thread::sleep_for(std::chrono::seconds(4));  // rank 1's node boots slowly
  const pid_t r1 = test::start(rank_cmd(1, port, test::app("cudagrad-train"), args), dir / "rank1.log");
  EXPECT_EQ(test::wait_for(r0, std::chrono::seconds(120)), 0) << test::read_text(dir / "rank0.log");
  EXPECT_EQ(test::wait_for(r1, std::chrono::seconds(30)), 0) << test::read_text(dir / "rank1.log");
  EXPECT_NE(test::read_text(dir / "rank0.log").find("all 2 replicas hold identical weights"), std::string::npos);
}

// (Rank 0 waiting for a rank that never comes: Launch.ARankThatNeverJoinsTimesOut.)
TEST(FaultDist, ARankWhoseRankZeroNeverComesUpFailsClearly) {
  const auto dir = test::make_temp_dir("fault_no_master");
  const auto t0 = Clock::now();
  const int rc = test::wait_for(test::start(rank_cmd(1, test::free_port(), test::app("cudagrad-train"),
                                                     train_args(dir / "out", "dist.timeout_s=2")),
                                            dir / "log.txt"),
                                std::chrono::seconds(60));
  const std::string log = test::read_text(dir / "log.txt");
  EXPECT_EQ(rc, 1) << log;
  EXPECT_LT(seconds_since(t0), 20.0) << log;
  EXPECT_NE(log.find("could not reach the store at 127.0.0.1:"), std::string::npos) << log;
}

// Runs two ranks by hand, each with its own binary and extra arguments; returns their logs.
std::pair<int, int> run_pair(const fs::path& dir, const std::string& bin0, const std::string& extra0,
                             const std::string& bin1, const std::string& extra1) {
  const int port = test::free_port();
  const pid_t r0 = test::start(rank_cmd(0, port, bin0, train_args(dir / "out", "dist.timeout_s=10 " + extra0)),
                               dir / "rank0.log");
  const pid_t r1 = test::start(rank_cmd(1, port, bin1, train_args(dir / "out", "dist.timeout_s=10 " + extra1)),
                               dir / "rank1.log");
  const int rc1 = test::wait_for(r1, std::chrono::seconds(60));
  const int rc0 = test::wait_for(r0, std::chrono::seconds(60));
  return {rc0, rc1};
}

TEST(FaultDist, RanksWithDifferentConfigsAreRefused) {
  const auto dir = test::make_temp_dir("fault_config");
  const auto [rc0, rc1] = run_pair(dir, test::app("cudagrad-train"), "optim.lr=0.1", test::app("cudagrad-train"),
                                   "optim.lr=0.2");
  const std::string log1 = test::read_text(dir / "rank1.log");
  EXPECT_EQ(rc1, 2) << log1;
  EXPECT_NE(rc0, 0) << test::read_text(dir / "rank0.log");
  EXPECT_NE(rc0, -1) << "rank 0 hung";
  EXPECT_NE(log1.find("rank 1 runs a different config than rank 0: key 'optim.lr' differs"), std::string::npos)
      << log1;
}

TEST(FaultDist, RanksRunningDifferentBinariesAreRefused) {
  const auto dir = test::make_temp_dir("fault_binary");
  // Another build: the same program with one byte more (still a valid executable).
  const fs::path other = dir / "cudagrad-train-other";
  fs::copy_file(test::app("cudagrad-train"), other);
  { std::ofstream(other, std::ios::app | std::ios::binary) << '\n'; }
  fs::permissions(other, fs::perms::owner_all);
  const auto [rc0, rc1] = run_pair(dir, test::app("cudagrad-train"), "", other.string(), "");
  const std::string log1 = test::read_text(dir / "rank1.log");
  EXPECT_EQ(rc1, 2) << log1;
  EXPECT_NE(rc0, 0) << test::read_text(dir / "rank0.log");
  EXPECT_NE(rc0, -1) << "rank 0 hung";
  EXPECT_NE(log1.find("rank 1 runs a different build of the program than rank 0"), std::string::npos) << log1;
}

}  // namespace
}  // namespace cg
