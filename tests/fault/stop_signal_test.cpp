// Ctrl-C (SIGINT) at the trainer, as a user presses it: during training steps it finishes the step,
// writes a checkpoint and exits 130; anywhere else (here: rendezvous, waiting for a rank that never
// comes) it exits 130 at once, instead of waiting out dist.timeout_s. Event order, not margins:
// each signal is sent once the log shows the phase under way, and the limit on the wait (60 s) is
// far below the 10-minute timeout that a trainer ignoring the signal would sit out.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/free_port.h"
#include "support/processes.h"

namespace cg {
namespace {
namespace fs = std::filesystem;

std::string train_args(const fs::path& out, const std::string& extra) {
  return "data.dataset=synthetic data.image_size=8 data.batch_size=16 data.num_workers=0 "
         "model.in_channels=3 model.widths=[4,8] model.blocks=[1,1] train.log_interval=1 train.device=cpu "
         "train.threads=1 dist.timeout_s=600 output.dir=" + out.string() + " " + extra;
}

// Waits up to 60 s for `text` in the log of a process that is still running.
bool wait_for_line(const fs::path& log, const std::string& text) {
  for (int i = 0; i < 600; ++i) {
    if (test::read_text(log).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ADD_FAILURE() << "never saw '" << text << "':\n" << test::read_text(log);
  return false;
}

TEST(StopSignal, CtrlCDuringRendezvousExitsAtOnce) {
  const auto dir = test::make_temp_dir("stop_rendezvous");
  const std::string env = "env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                          std::to_string(test::free_port());
  const pid_t pid = test::start(env + " " + test::app("cudagrad-train") + " " + train_args(dir / "out", "data.synthetic_size=128"),
                                dir / "log.txt");
  ASSERT_TRUE(wait_for_line(dir / "log.txt", "resolved config"));
  kill(pid, SIGINT);
  const int rc = test::wait_for(pid, std::chrono::seconds(60));
  const std::string log = test::read_text(dir / "log.txt");
  EXPECT_EQ(rc, 130) << (rc == -1 ? "Ctrl-C waited for the rendezvous timeout\n" : "") << log;
  EXPECT_NE(log.find("interrupted, exiting now"), std::string::npos) << log;
}

TEST(StopSignal, CtrlCDuringTrainingFinishesTheStepAndCheckpoints) {
  const auto dir = test::make_temp_dir("stop_training");
  const pid_t pid = test::start(test::app("cudagrad-train") + " " + train_args(dir / "out", "data.synthetic_size=100000 train.epochs=1"),
                                dir / "log.txt");
  // 6,250 steps in the epoch: the signal lands among them, not in an evaluation or a checkpoint.
  ASSERT_TRUE(wait_for_line(dir / "log.txt", "epoch 1 step 2 "));
  kill(pid, SIGINT);
  const int rc = test::wait_for(pid, std::chrono::seconds(60));
  const std::string log = test::read_text(dir / "log.txt");
  EXPECT_EQ(rc, 130) << log;
  EXPECT_NE(log.find("stop requested (signal 2): checkpointing at step"), std::string::npos) << log;
  EXPECT_TRUE(fs::is_regular_file(dir / "out" / "checkpoints" / "last.safetensors")) << log;
  EXPECT_NE(log.find("resume with checkpoint.resume_from="), std::string::npos) << log;
}

}  // namespace
}  // namespace cg
