// The restart soak: a 2-rank CPU run under cudagrad-launch --max-restarts 10, one rank SIGKILLed at
// a random moment ten times (each time after the group has made progress since its restart),
// must end with weights and optimizer state bit-identical to an uninterrupted run of the same
// steps. Bit-identity alone would hold for a launcher that restarted from step 0 each time, so each
// generation must have resumed from the newest checkpoint on disk when its predecessor died, at
// that checkpoint's step (metrics.jsonl's "resume" records), and trained on from there. Label
// "soak" (ctest -L soak runs it alone); a minute or two on 2 idle cores.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "support/checkpoint_files.h"
#include "support/launcher_restarts.h"
#include "support/metrics_file.h"
#include "support/processes.h"
#include "util/safetensors.h"

namespace cg {
namespace {
namespace fs = std::filesystem;

constexpr int kKills = 10;
// Each generation gains a checkpoint or two before its kill (the kill lands within an epoch of the
// generation's first checkpoint, which the loop below sees within 5 ms): 60 epochs leave ten
// generations far from the end even where an epoch takes a few milliseconds and start-up dominates
// the estimate of its length (with 30, a fast machine once let generation 9 finish the run).
constexpr int kEpochs = 60;

std::string launch(const fs::path& out, int max_restarts) {
  return test::app("cudagrad-launch") + " --standalone --nproc-per-node 2 --grace-seconds 2 --max-restarts " +
         std::to_string(max_restarts) + " " + test::app("cudagrad-train") +
         // Eight optimizer steps per epoch, a checkpoint after each.
         " data.dataset=synthetic data.synthetic_size=256 data.image_size=8 data.batch_size=16 "
         "data.num_workers=1 data.augment=true data.shuffle=true model.in_channels=3 model.widths=[4,8] "
         "model.blocks=[1,1] optim.momentum=0.9 train.epochs=" + std::to_string(kEpochs) + " train.device=cpu train.threads=1 "
         "train.log_interval=4 checkpoint.save_every=1 dist.timeout_s=20 output.dir=" + out.string();
}

int count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

// Generation k+1 resumed from `newest[k]` at its step, and trained on from there.
void expect_each_generation_resumed(const fs::path& out, const std::vector<std::string>& newest,
                                    const std::vector<int64_t>& steps) {
  const std::vector<test::Resumption> r = test::resumptions(out);
  ASSERT_EQ(r.size(), newest.size()) << "resumes in metrics.jsonl != kills";
  for (size_t k = 0; k < r.size(); ++k) {
    EXPECT_EQ(r[k].from, newest[k]) << "generation " << k + 1 << " did not resume from the newest checkpoint";
    EXPECT_EQ(r[k].step, steps[k]) << "generation " << k + 1 << " resumed at another step than its checkpoint's";
    EXPECT_GT(r[k].first_train_step, r[k].step) << "generation " << k + 1 << " did not train on from its step";
  }
}

TEST(RestartSoak, TenRandomKillsEndBitIdenticalToAnUninterruptedRun) {
  const auto dir = test::make_temp_dir("soak");
  const fs::path reference = dir / "reference", soaked = dir / "soaked";
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(test::wait_for(test::start(launch(reference, 0), dir / "reference.log"), std::chrono::seconds(300)), 0)
      << test::read_text(dir / "reference.log");
  // About how long an epoch takes here (start-up included): each kill lands within the epoch after
  // the generation's first checkpoint, so ten generations cannot finish the run.
  const int epoch_ms = int(std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now() - t0).count() / kEpochs);

  std::mt19937 rng(std::random_device{}());
  const pid_t pid = test::start(launch(soaked, kKills), dir / "soak.log");
  const std::string marker = soaked.string();
  std::vector<std::string> newest;  // at each restart
  std::vector<int64_t> newest_steps;
  for (int k = 0; k < kKills; ++k) {
    // This generation has started (generation k logs "checkpoint:" lines after its restart
    // notice), written at least one checkpoint of its own, and now dies at a random moment.
    bool progressed = false;
    for (int i = 0; i < 24000 && !progressed; ++i) {  // 2 minutes at the most
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      const std::string log = test::read_text(dir / "soak.log");
      const size_t since = k == 0 ? 0 : log.find("restarting the group (" + std::to_string(k) + " of");
      progressed = since != std::string::npos && log.find("checkpoint: ", since) != std::string::npos;
    }
    ASSERT_TRUE(progressed) << "generation " << k << " made no progress\n" << test::read_text(dir / "soak.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(0, epoch_ms)(rng)));
    const int rank = std::uniform_int_distribution<int>(0, 1)(rng);
    const pid_t victim = test::find_rank(marker, rank);
    ASSERT_GT(victim, 0) << "rank " << rank << " not found (did the run finish early?)\n"
                         << test::read_text(dir / "soak.log");
    kill(victim, SIGKILL);
    newest.push_back(test::newest_checkpoint_at_restart(dir / "soak.log", soaked / "checkpoints", k + 1));
    ASSERT_FALSE(newest.back().empty()) << "no restart " << k + 1 << " or no checkpoint\n" << test::read_text(dir / "soak.log");
    newest_steps.push_back(test::step_of(newest.back()));
  }
  const int rc = test::wait_for(pid, std::chrono::seconds(300));
  const std::string log = test::read_text(dir / "soak.log");
  ASSERT_EQ(rc, 0) << log;
  EXPECT_EQ(count(log, "restarting the group ("), kKills) << log;
  EXPECT_NE(log.find("all 2 replicas hold identical weights"), std::string::npos) << log;
  expect_each_generation_resumed(soaked, newest, newest_steps);

  const safetensors::File a = safetensors::load((reference / "checkpoints" / "last.safetensors").string());
  const safetensors::File b = safetensors::load((soaked / "checkpoints" / "last.safetensors").string());
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& [name, ra] : a.tensors) {
    const safetensors::TensorRecord* rb = b.find(name);
    ASSERT_NE(rb, nullptr) << name;
    EXPECT_TRUE(ra.bytes == rb->bytes) << name << " differs from the uninterrupted run";
  }
  EXPECT_EQ(a.metadata.at("cudagrad.step"), b.metadata.at("cudagrad.step"));
}

}  // namespace
}  // namespace cg
