// Faults while checkpoints are written, with real trainer processes: the disk fills up (a file
// size limit: writes fail with EFBIG exactly as they would with ENOSPC), and SIGKILL lands at
// random moments of a run that checkpoints constantly. Either way the newest checkpoint on disk
// must be complete, and a resumed run must continue from it.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <regex>

#include "support/processes.h"
#include "util/check.h"
#include "util/safetensors.h"

namespace cg {
namespace {
namespace fs = std::filesystem;

std::string trainer_args(const fs::path& out, const std::string& extra) {
  return test::app("cudagrad-train") +
         " data.dataset=synthetic data.synthetic_size=64 data.image_size=8 data.batch_size=16 data.num_workers=0 "
         "model.in_channels=3 model.blocks=[1,1] train.device=cpu train.threads=1 train.log_interval=1 "
         "output.dir=" + out.string() + " " + extra;
}

std::string newest_checkpoint(const fs::path& dir) {  // by modification time, as the trainer picks
  std::string best;
  fs::file_time_type best_time{};
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    if (best.empty() || e.last_write_time() > best_time) {
      best = e.path().string();
      best_time = e.last_write_time();
    }
  }
  return best;
}

int temporary_files(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().filename().string().find(".tmp.") != std::string::npos;
  return n;
}

TEST(FaultCheckpoint, DiskFullKeepsThePreviousCheckpointAndNamesThePath) {
  const auto dir = test::make_temp_dir("fault_disk_full");
  const fs::path out = dir / "out", ckpt = out / "checkpoints" / "last.safetensors";
  // Widths [16,32]: a checkpoint of about 200 KB, far above the log and metrics files.
  const std::string model = "model.widths=[16,32] train.epochs=1";
  ASSERT_EQ(test::wait_for(test::start(trainer_args(out, model), dir / "first.log"), std::chrono::seconds(120)), 0)
      << test::read_text(dir / "first.log");
  const std::string before = test::read_text(ckpt);
  ASSERT_GT(before.size(), 150000u);

  // The second run resumes and must replace last.safetensors, but no file may grow past 64 KB.
  const pid_t pid = test::start(trainer_args(out, "model.widths=[16,32] train.epochs=2 checkpoint.resume_from=" +
                                                      ckpt.string()),
                                dir / "second.log", 64 * 1024);
  const int rc = test::wait_for(pid, std::chrono::seconds(120));
  const std::string log = test::read_text(dir / "second.log");
  EXPECT_EQ(rc, 1) << log;
  EXPECT_NE(log.find("cannot write " + ckpt.string()), std::string::npos) << log;
  EXPECT_NE(log.find("File too large"), std::string::npos) << log;
  EXPECT_EQ(test::read_text(ckpt), before) << "the previous checkpoint changed";
  EXPECT_NO_THROW(safetensors::load(ckpt.string()));
  EXPECT_EQ(temporary_files(out / "checkpoints"), 0) << "the failed write left its temporary file";
}

// The step a checkpoint records.
int64_t step_of(const std::string& path) { return std::stoll(safetensors::load(path).metadata.at("cudagrad.step")); }

TEST(FaultCheckpoint, SigkillAtRandomMomentsNeverLeavesAnIncompleteNewestCheckpoint) {
  const auto dir = test::make_temp_dir("fault_kill");
  const fs::path out = dir / "out", ckpts = out / "checkpoints";
  // Four steps per epoch and a checkpoint after every epoch: the run spends much of its time
  // writing (and fsyncing) checkpoints of about 200 KB, so random kills often land mid-write.
  const std::string args = "model.widths=[16,32] train.epochs=100000 checkpoint.save_every=1";
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> delay_ms(0, 600);
  constexpr int kKills = 16;
  int resumed = 0, leftovers = 0;
  int64_t last_step = -1;
  for (int k = 0; k < kKills; ++k) {
    const std::string newest = fs::exists(ckpts) ? newest_checkpoint(ckpts) : "";
    const std::string resume = newest.empty() ? "" : " checkpoint.resume_from=" + newest;
    const fs::path log = dir / ("run" + std::to_string(k) + ".log");
    const int temporaries_before = fs::exists(ckpts) ? temporary_files(ckpts) : 0;
    const pid_t pid = test::start(trainer_args(out, args + resume), log);
    // Wait until this run has written a checkpoint of its own, then kill it a random moment later.
    bool wrote = false;
    for (int i = 0; i < 1200 && !wrote; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      wrote = fs::exists(ckpts) && test::read_text(log).find("checkpoint: ") != std::string::npos;
    }
    ASSERT_TRUE(wrote) << test::read_text(log);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms(rng)));
    kill(-pid, SIGKILL);
    test::wait_for(pid, std::chrono::seconds(10));
    leftovers += temporary_files(ckpts) > temporaries_before;

    const std::string text = test::read_text(log);
    if (!newest.empty()) {  // the run resumed from the newest checkpoint there was, at its step
      const std::regex resumed_at("resumed from " + newest + ": epoch [0-9]+, batch [0-9]+, step ([0-9]+)");
      std::smatch m;
      ASSERT_TRUE(std::regex_search(text, m, resumed_at)) << text;
      EXPECT_EQ(std::stoll(m[1]), step_of(newest));
      EXPECT_GE(step_of(newest), last_step) << "resumed from an older state";
      ++resumed;
    }
    // Whatever the kill interrupted, the newest checkpoint is complete (load() verifies sizes and
    // the checksum) and no older than the last one this loop saw.
    const std::string now = newest_checkpoint(ckpts);
    ASSERT_FALSE(now.empty());
    ASSERT_NO_THROW(safetensors::load(now)) << now;
    last_step = step_of(now);
  }
  EXPECT_EQ(resumed, kKills - 1);
  // Not asserted (the kills are random), but worth seeing: how many kills landed mid-write.
  std::printf("%d of %d kills left a temporary file, i.e. landed while a checkpoint was being written\n",
              leftovers, kKills);
}

}  // namespace
}  // namespace cg
