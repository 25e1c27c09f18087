// Which checkpoint a restarted run resumes from (train/resume_point.h), in one process: the newest
// of the trainer's own checkpoints that verifies; a corrupt newest one is skipped, a foreign file
// is never taken, and a resume_from that rank 0 cannot read is an error naming it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "nn/checkpoint.h"
#include "nn/layers.h"
#include "nn/sharded_checkpoint.h"
#include "support/paths.h"
#include "train/resume_point.h"
#include "util/check.h"

namespace cg::train {
namespace {
namespace fs = std::filesystem;

void save_tiny_checkpoint(const fs::path& path, int64_t step) {
  Generator gen(1);
  nn::Linear model({.in_features = 3, .out_features = 2}, gen);
  nn::SGD opt(model.named_parameters(), SgdOptions{0.1f, 0.9f, 0.f, 0.f, false});
  nn::save_checkpoint(path.string(), model, opt, {0, 0, step, "sgd", "", ""});
}

// Each file written a little after the previous, so that modification times order them.
void later() { std::this_thread::sleep_for(std::chrono::milliseconds(20)); }

TEST(ResumePoint, ARestartTakesTheNewestTrainerCheckpointThatVerifies) {
  const fs::path dir = test::make_temp_dir("resume_point");
  DistContext one_process(5.0);
  EXPECT_EQ(agree_on_resume_checkpoint(one_process, dir, "", /*restarted=*/true), "") << "nothing to resume from";
  save_tiny_checkpoint(dir / "epoch_1.safetensors", 4);
  later();
  save_tiny_checkpoint(dir / "epoch_2.safetensors", 8);
  later();
  {  // the newest trainer checkpoint, damaged after it was written
    std::fstream f(dir / "epoch_2.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  later();
  save_tiny_checkpoint(dir / "weights_from_elsewhere.safetensors", 99);  // newest, not a name the trainer writes
  EXPECT_EQ(agree_on_resume_checkpoint(one_process, dir, "", true), (dir / "epoch_1.safetensors").string());
  EXPECT_EQ(agree_on_resume_checkpoint(one_process, dir, "", /*restarted=*/false), "") << "a fresh run resumes nothing";
}

TEST(ResumePoint, EveryCheckpointCorruptOrAnUnreadableResumeFromIsAnErrorNamingIt) {
  const fs::path dir = test::make_temp_dir("resume_point_bad");
  DistContext one_process(5.0);
  std::ofstream(dir / "last.safetensors") << "not a checkpoint";
  try {
    agree_on_resume_checkpoint(one_process, dir, "", true);
    FAIL() << "resumed from nothing while a checkpoint was there";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("none of the 1 checkpoints in " + dir.string()), std::string::npos) << e.what();
  }
  const std::string foreign = (dir / "last.safetensors").string();
  try {
    agree_on_resume_checkpoint(one_process, dir, foreign, false);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint.resume_from=" + foreign + " cannot be resumed from on rank 0"),
              std::string::npos) << e.what();
  }
}

// A sharded checkpoint's folder (nn/sharded_checkpoint.h) of one rank's pieces, as the trainer names it.
void save_tiny_sharded(const fs::path& folder, int64_t step) {
  Generator gen(1);
  nn::Linear model({.in_features = 3, .out_features = 2}, gen);
  nn::SGD opt(model.named_parameters(), SgdOptions{0.1f, 0.9f, 0.f, 0.f, false});
  const int64_t generation = nn::next_generation(folder);
  const nn::ShardFile shard = nn::write_shard(folder, 0, 1, generation, nn::local_pieces(model, opt, 0, 1));
  nn::write_shard_index(folder, generation, {shard}, nn::progress_metadata(opt, {0, 0, step, "sgd", "", ""}));
}

// After a restart the .shards folders count among the trainer's checkpoints, newest first, by the
// same rule: one whose save never finished (no index) or whose shard is damaged is skipped, with a
// warning; a folder of another name is never taken. A resume_from folder may end in a slash.
TEST(ResumePoint, ARestartTakesTheNewestShardedCheckpointThatVerifies) {
  const fs::path dir = test::make_temp_dir("resume_point_sharded");
  DistContext one_process(5.0);
  save_tiny_checkpoint(dir / "epoch_1.safetensors", 4);
  later();
  save_tiny_sharded(dir / "epoch_2.shards", 8);
  later();
  save_tiny_sharded(dir / "epoch_3.shards", 12);
  fs::remove(dir / "epoch_3.shards" / "index.json");  // a save that did not finish
  later();
  save_tiny_sharded(dir / "other.shards", 16);  // not a name the trainer writes
  EXPECT_EQ(agree_on_resume_checkpoint(one_process, dir, "", true), (dir / "epoch_2.shards").string());
  std::ofstream(dir / "epoch_2.shards" / "rank0-gen1.safetensors", std::ios::app) << "x";  // longer than its index says
  EXPECT_EQ(agree_on_resume_checkpoint(one_process, dir, "", true), (dir / "epoch_1.safetensors").string());
  EXPECT_EQ(agree_on_resume_checkpoint(one_process, dir, (dir / "other.shards/").string(), false),
            (dir / "other.shards").string());
}

}  // namespace
}  // namespace cg::train
