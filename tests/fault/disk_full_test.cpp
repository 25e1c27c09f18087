// A truly full disk while a checkpoint is written: the checkpoints go to a tmpfs of 256 KiB (root
// only: NEED_TOOL) that holds one checkpoint of about 170 KiB but not a second beside it, so
// writing the replacement fails with ENOSPC as on a full disk (FaultCheckpoint.DiskFull... covers
// the file size limit, EFBIG). The trainer must exit 1 naming the path, leave the previous
// checkpoint intact and loadable, and leave no temporary behind.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/checkpoint_files.h"
#include "support/need_tool.h"
#include "support/processes.h"
#include "support/tmpfs_mount.h"
#include "util/safetensors.h"

namespace cg {
namespace {
namespace fs = std::filesystem;

// Widths [16,32]: a checkpoint of about 170 KiB, four steps per epoch.
std::string trainer(const fs::path& out, const fs::path& ckpts, const std::string& extra) {
  return test::app("cudagrad-train") +
         " data.dataset=synthetic data.synthetic_size=64 data.image_size=8 data.batch_size=16 data.num_workers=0 "
         "model.in_channels=3 model.widths=[16,32] model.blocks=[1,1] train.device=cpu train.threads=1 "
         "output.dir=" + out.string() + " checkpoint.dir=" + ckpts.string() + " " + extra;
}

TEST(FaultDiskFull, OutOfSpaceKeepsThePreviousCheckpointNamesThePathAndExits1) {
  const auto dir = test::make_temp_dir("fault_enospc");
  const fs::path out = dir / "out", ckpts = dir / "tmpfs", last = ckpts / "last.safetensors";
  const test::TmpfsMount mount(ckpts, 256 * 1024);
  NEED_TOOL(mount.why_not());
  ASSERT_EQ(test::wait_for(test::start(trainer(out, ckpts, "train.epochs=1"), dir / "first.log"),
                           std::chrono::seconds(120)),
            0)
      << test::read_text(dir / "first.log");
  const std::string before = test::read_text(last);
  ASSERT_GT(before.size(), 150000u);

  const pid_t pid = test::start(trainer(out, ckpts, "train.epochs=2 checkpoint.resume_from=" + last.string()),
                                dir / "second.log");
  const int rc = test::wait_for(pid, std::chrono::seconds(120));
  const std::string log = test::read_text(dir / "second.log");
  EXPECT_EQ(rc, 1) << log;
  EXPECT_NE(log.find("cannot write " + last.string()), std::string::npos) << log;
  EXPECT_NE(log.find("No space left on device"), std::string::npos) << log;
  EXPECT_TRUE(test::read_text(last) == before) << "the previous checkpoint changed";  // not printed: binary
  EXPECT_NO_THROW(safetensors::load(last.string()));
  EXPECT_EQ(test::temporary_files(ckpts), 0) << "the failed write left its temporary file";
}

}  // namespace
}  // namespace cg
