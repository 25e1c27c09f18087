// dist.sharding=optimizer (ZeRO-1; also by its older name optim.zero_sharding=true) and
// shard_grad_op (ZeRO-2) with real processes, through cudagrad-launch and mpirun: 2 and 3 ranks
// end with weights and optimizer state bit-identical to unsharded DDP (SGD with momentum; AdamW
// with weight decay, the cosine schedule and gradient accumulation); rank 0 reports holding about
// 1/world of the optimizer state at the end, and under shard_grad_op about 1/world of the
// gradients, against the unsharded run's report; the timeline names the reduce-scatters and
// all-gathers; and checkpoints interchange: written sharded on 2 ranks, resumed sharded on 2 (as
// if never interrupted) and 3 ranks (either strategy), each matching its unsharded counterpart,
// and unsharded on 1 process; every resumed run shows in metrics.jsonl that it resumed at step 5
// (a run ignoring its checkpoint would match its counterpart just as well).
// With dist.grad_compression (fp16, bf16) the same holds against unsharded compressed DDP, the
// start-up log giving the 16-bit bytes reduce-scattered and the float32 bytes all-gathered.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>
#include <string>

#include "support/need_tool.h"
#include "support/training_runs.h"

namespace cg {
namespace {
namespace fs = std::filesystem;
using test::expect_resumed_at_step_5;
using test::expect_close_tensors;
using test::expect_same_tensors;
using test::kAdamW;
using test::held;
using test::Held;
using test::last;
using test::run;
using test::train_args;
using test::Via;

// `sharded` holds about 1/ranks of `plain`'s optimizer state, and (shard_grad_op, full_shard) of
// its gradients, and (full_shard) of its parameters.
enum class Shards { state, gradients, parameters };
void expect_shares(const std::string& sharded, const std::string& plain, int ranks, Shards what) {
  const Held s = held(sharded), p = held(plain);
  // full_shard cuts units, not DDP's buckets, into shards: the ring's blocks of small units are
  // uneven, a looser bound.
  EXPECT_NEAR(s.state / p.state, 1.0 / ranks, what == Shards::parameters ? 0.1 : 0.05)
      << s.state << " of " << p.state << " bytes of state";
  // The shards cover the alignment padding between parameters too: a looser bound.
  EXPECT_NEAR(s.gradients / p.gradients, what != Shards::state ? 1.0 / ranks : 1.0, 0.1)
      << s.gradients << " of " << p.gradients << " bytes of gradients";
  if (what == Shards::parameters)  // against DDP's gradient buffer, padded as the units are
    EXPECT_LE(s.parameters, 1.1 * p.gradients / ranks) << s.parameters << " bytes of parameters";
  else
    EXPECT_GE(s.parameters, p.parameters) << "parameters are not sharded by these strategies";
}


TEST(ZeroSharding, TwoRanksSgdMomentumBitIdenticalToUnshardedAndTimelineNamesTheCollectives) {
  const auto dir = test::make_temp_dir("zero_sgd");
  const std::string sgd = "optim.name=sgd optim.momentum=0.9 optim.nesterov=true optim.weight_decay=1e-3";
  const std::string log = run(dir, "sharded", 2, sgd + " dist.sharding=optimizer profile.enabled=true");
  const std::string plain = run(dir, "plain", 2, sgd);
  expect_same_tensors(last(dir, "sharded"), last(dir, "plain"));
  EXPECT_NE(log.find("all 2 replicas hold identical weights"), std::string::npos) << log;
  expect_shares(log, plain, 2, Shards::state);
  int reduce_scatters = 0, all_gathers = 0;
  const auto trace = nlohmann::json::parse(test::read_text(dir / "sharded" / "trace_rank0.json"))["traceEvents"];
  for (const auto& e : trace) {
    if (e.value("cat", "") != "communication") continue;
    const std::string name = e["name"];
    reduce_scatters += name.rfind("reduce_scatter", 0) == 0;
    all_gathers += name.rfind("all_gather", 0) == 0;
  }
  EXPECT_GT(reduce_scatters, 0) << "no reduce_scatter on the timeline";
  EXPECT_GT(all_gathers, 0) << "no all_gather on the timeline";
}

TEST(ZeroSharding, ThreeRanksAdamWWithAccumulationBitIdenticalToUnshardedEitherStrategy) {
  const auto dir = test::make_temp_dir("zero_adamw");
  const std::string accumulate = kAdamW + " train.grad_accum_steps=2";
  const std::string plain = run(dir, "plain", 3, accumulate);
  for (const char* strategy : {"optimizer", "shard_grad_op"}) {
    SCOPED_TRACE(strategy);
    const std::string log = run(dir, strategy, 3, accumulate + " dist.sharding=" + strategy);
    expect_same_tensors(last(dir, strategy), last(dir, "plain"));
    expect_shares(log, plain, 3, std::string(strategy) == "shard_grad_op" ? Shards::gradients : Shards::state);
  }
}

// full_shard: at 2 ranks every sum is a + b, so the units' reduce-scatters give DDP's sums bit for
// bit; at 3 ranks, with accumulation, within float32 rounding of DDP. Rank 0 holds about a third
// of the parameters, gradients and state.
TEST(ZeroSharding, FullShardTwoRanksBitIdenticalThreeRanksWithAccumulationWithinRounding) {
  const auto dir = test::make_temp_dir("zero_full");
  const std::string sgd = "optim.name=sgd optim.momentum=0.9 optim.nesterov=true optim.weight_decay=1e-3";
  run(dir, "full2", 2, sgd + " dist.sharding=full_shard profile.enabled=true");
  run(dir, "plain2", 2, sgd);
  expect_same_tensors(last(dir, "full2"), last(dir, "plain2"));
  int all_gathers = 0, reduce_scatters = 0;
  const auto trace = nlohmann::json::parse(test::read_text(dir / "full2" / "trace_rank0.json"))["traceEvents"];
  for (const auto& e : trace) {
    if (e.value("cat", "") != "communication") continue;
    const std::string name = e["name"];
    all_gathers += name.rfind("all_gather", 0) == 0;
    reduce_scatters += name.rfind("reduce_scatter", 0) == 0;
  }
  // Three units (the root, two blocks) per step: 3 reduce-scatters, and 5 gathers: each block
  // before its forward and again before its backward, the root (kept between the two) once; the
  // evaluations and checkpoints gather more.
  EXPECT_GT(reduce_scatters, 0);
  EXPECT_GE(3 * all_gathers, 5 * reduce_scatters) << "a block is gathered for its forward and again for its backward";
  const std::string accumulate = kAdamW + " train.grad_accum_steps=2";
  const std::string log = run(dir, "full3", 3, accumulate + " dist.sharding=full_shard");
  const std::string plain = run(dir, "plain3", 3, accumulate);
  expect_close_tensors(last(dir, "full3"), last(dir, "plain3"), test::kAfterABranchFlip);
  expect_shares(log, plain, 3, Shards::parameters);
  EXPECT_NE(log.find("all 3 replicas hold identical buffers"), std::string::npos) << log;
}

TEST(ZeroSharding, MpirunTwoRanksAdamWBitIdenticalToUnsharded) {
  NEED_TOOL(test::missing_command("mpirun", "Debian's openmpi-bin"));
  const auto dir = test::make_temp_dir("zero_mpirun");
  const std::string log = run(dir, "sharded", 2, kAdamW + " optim.zero_sharding=true", Via::mpirun);
  EXPECT_NE(log.find("Open MPI"), std::string::npos) << log;
  run(dir, "plain", 2, kAdamW, Via::mpirun);
  expect_same_tensors(last(dir, "sharded"), last(dir, "plain"));
}

// A sharded 2-rank run stopped at step 5 writes the same checkpoint as an unsharded one; resumed
// sharded on 2 ranks it ends as the uninterrupted sharded run; resumed on 3 ranks sharded (ZeRO-1
// or ZeRO-2) it ends as the unsharded checkpoint resumed on 3 ranks unsharded; on 1 process
// unsharded, the same. The 2-rank runs use the older key, optim.zero_sharding=true.
TEST(ZeroSharding, CheckpointsInterchangeAcrossShardingAndWorldSizes) {
  const auto dir = test::make_temp_dir("zero_resume");
  const std::string zero = kAdamW + " optim.zero_sharding=true";
  run(dir, "whole", 2, zero);
  run(dir, "part_sharded", 2, zero + " train.max_steps=5");
  run(dir, "part_plain", 2, kAdamW + " train.max_steps=5");
  expect_same_tensors(last(dir, "part_sharded"), last(dir, "part_plain"));
  const std::string from_sharded = " checkpoint.resume_from=" + last(dir, "part_sharded").string();
  const std::string from_plain = " checkpoint.resume_from=" + last(dir, "part_plain").string();

  run(dir, "resumed2", 2, zero + from_sharded);
  expect_same_tensors(last(dir, "resumed2"), last(dir, "whole"));
  expect_resumed_at_step_5(dir, "resumed2", last(dir, "part_sharded"));
  run(dir, "resumed3_sharded", 3, zero + from_sharded);
  run(dir, "resumed3_plain", 3, kAdamW + from_plain);
  expect_same_tensors(last(dir, "resumed3_sharded"), last(dir, "resumed3_plain"));
  expect_resumed_at_step_5(dir, "resumed3_sharded", last(dir, "part_sharded"));
  expect_resumed_at_step_5(dir, "resumed3_plain", last(dir, "part_plain"));
  run(dir, "resumed3_grad_op", 3, kAdamW + " dist.sharding=shard_grad_op" + from_sharded);
  expect_same_tensors(last(dir, "resumed3_grad_op"), last(dir, "resumed3_plain"));
  expect_resumed_at_step_5(dir, "resumed3_grad_op", last(dir, "part_sharded"));
  run(dir, "resumed3_full", 3, kAdamW + " dist.sharding=full_shard" + from_sharded);
  expect_close_tensors(last(dir, "resumed3_full"), last(dir, "resumed3_plain"), test::kAfterABranchFlip);
  expect_resumed_at_step_5(dir, "resumed3_full", last(dir, "part_sharded"));
  // full_shard writes the checkpoint DDP does (2 ranks: the same sums), and it resumes unsharded.
  run(dir, "part_full", 2, kAdamW + " dist.sharding=full_shard train.max_steps=5");
  expect_same_tensors(last(dir, "part_full"), last(dir, "part_plain"));
  // One process, unsharded, from the sharded checkpoint. No counterpart resumed from part_plain:
  // its tensors are part_sharded's, byte for byte (checked above), so that run would be this one
  // again; what is left to show is that the sharded checkpoint loads whole and the run resumes.
  run(dir, "resumed1", 1, kAdamW + from_sharded);
  expect_resumed_at_step_5(dir, "resumed1", last(dir, "part_sharded"));
}

// ---- ZeRO-1 with dist.grad_compression: gradients reduce-scattered in 16 bits (the first half of
// the compressed all-reduce), parameters all-gathered in float32; the result is bit-identical to
// unsharded compressed DDP, whatever the ranks, the 16-bit type, the optimizer and the launcher.

struct CompressedCase {
  int ranks;
  std::string compression;  // fp16 or bf16
  bool adamw;
  Via via;
};
void PrintTo(const CompressedCase& k, std::ostream* os) {
  *os << k.ranks << " ranks " << k.compression << (k.adamw ? " adamw" : " sgd")
      << (k.via == Via::launch ? " launch" : " mpirun");
}
std::string compressed_case_name(const ::testing::TestParamInfo<CompressedCase>& info) {
  const CompressedCase& k = info.param;
  return std::to_string(k.ranks) + "ranks_" + k.compression + (k.adamw ? "_adamw" : "_sgd") +
         (k.via == Via::launch ? "_launch" : "_mpirun");
}

const std::string kSgdMomentum = "optim.name=sgd optim.momentum=0.9 optim.nesterov=true optim.weight_decay=1e-3";

long long logged_bytes(const std::string& log, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(log, m, std::regex(pattern))) {
    ADD_FAILURE() << "no line matching '" << pattern << "' in\n" << log;
    return -1;
  }
  return std::stoll(m[1]);
}

class ZeroCompressed : public ::testing::TestWithParam<CompressedCase> {};

TEST_P(ZeroCompressed, BitIdenticalToUnshardedCompressedDdpWithThe16BitBytesLogged) {
  const CompressedCase k = GetParam();
  if (k.via == Via::mpirun) NEED_TOOL(test::missing_command("mpirun", "Debian's openmpi-bin"));
  const auto dir = test::make_temp_dir("zero_compressed");
  // AdamW with the cosine schedule and gradient accumulation; SGD with Nesterov momentum.
  const std::string optimizer = k.adamw ? kAdamW + " train.grad_accum_steps=2" : kSgdMomentum;
  const std::string compressed = optimizer + " dist.grad_compression=" + k.compression;
  const std::string log =
      run(dir, "sharded", k.ranks, compressed + " dist.sharding=optimizer profile.enabled=true", k.via);
  const std::string plain_log = run(dir, "plain", k.ranks, compressed, k.via);
  expect_same_tensors(last(dir, "sharded"), last(dir, "plain"));
  EXPECT_NE(log.find("all " + std::to_string(k.ranks) + " replicas hold identical weights"), std::string::npos) << log;
  expect_shares(log, plain_log, k.ranks, Shards::state);
  if (k.via == Via::mpirun) {
    EXPECT_NE(log.find("Open MPI"), std::string::npos) << log;
  }
  // The gradients' 16-bit bytes reduce-scattered are the unsharded run's 16-bit bytes
  // all-reduced; the parameters all-gathered are float32, twice that.
  const std::string wire = "\\(" + k.compression + " compressed\\)";
  const long long scattered = logged_bytes(log, "(\\d+) bytes reduce-scattered per step " + wire);
  const long long gathered = logged_bytes(log, "(\\d+) bytes of parameters all-gathered \\(float32\\)");
  EXPECT_EQ(scattered, logged_bytes(plain_log, "(\\d+) bytes all-reduced per step " + wire));
  EXPECT_EQ(gathered, 2 * scattered);
  // Rank 0's timeline: 16-bit reduce-scatters (after the first, all-reduced, step) and float32
  // all-gathers.
  const std::string type = k.compression == "fp16" ? "float16" : "bfloat16";
  int reduce_scatters = 0, all_gathers = 0;
  const auto trace = nlohmann::json::parse(test::read_text(dir / "sharded" / "trace_rank0.json"))["traceEvents"];
  for (const auto& e : trace) {
    if (e.value("cat", "") != "communication") continue;
    const std::string name = e["name"];
    reduce_scatters += std::regex_search(name, std::regex("^reduce_scatter of \\d+ " + type + " values"));
    all_gathers += std::regex_search(name, std::regex("^all_gather \\d+ floats"));
  }
  EXPECT_GT(reduce_scatters, 0) << "no 16-bit reduce_scatter on the timeline";
  EXPECT_GT(all_gathers, 0) << "no float32 all_gather on the timeline";
}

std::vector<CompressedCase> compressed_cases() {
  std::vector<CompressedCase> out;
  for (Via via : {Via::launch, Via::mpirun})
    for (int ranks : {2, 3})
      for (const char* compression : {"fp16", "bf16"})
        for (bool adamw : {false, true}) out.push_back({ranks, compression, adamw, via});
  return out;
}
INSTANTIATE_TEST_SUITE_P(Runs, ZeroCompressed, ::testing::ValuesIn(compressed_cases()), compressed_case_name);

// Compressed checkpoints interchange too: a sharded compressed 2-rank run stopped at step 5 writes
// the unsharded compressed run's checkpoint; resumed sharded on 2 ranks it ends as the
// uninterrupted run; resumed sharded on 3 ranks it ends as the unsharded checkpoint resumed
// unsharded on 3 ranks.
TEST(ZeroSharding, CompressedCheckpointsInterchangeAcrossShardingAndWorldSizes) {
  const auto dir = test::make_temp_dir("zero_compressed_resume");
  const std::string plain = kAdamW + " dist.grad_compression=bf16", zero = plain + " optim.zero_sharding=true";
  run(dir, "whole", 2, zero);
  run(dir, "part_sharded", 2, zero + " train.max_steps=5");
  run(dir, "part_plain", 2, plain + " train.max_steps=5");
  expect_same_tensors(last(dir, "part_sharded"), last(dir, "part_plain"));
  const std::string from_sharded = " checkpoint.resume_from=" + last(dir, "part_sharded").string();
  const std::string from_plain = " checkpoint.resume_from=" + last(dir, "part_plain").string();
  run(dir, "resumed2", 2, zero + from_sharded);
  expect_same_tensors(last(dir, "resumed2"), last(dir, "whole"));
  expect_resumed_at_step_5(dir, "resumed2", last(dir, "part_sharded"));
  run(dir, "resumed3_sharded", 3, zero + from_sharded);
  run(dir, "resumed3_plain", 3, plain + from_plain);
  expect_same_tensors(last(dir, "resumed3_sharded"), last(dir, "resumed3_plain"));
  expect_resumed_at_step_5(dir, "resumed3_sharded", last(dir, "part_sharded"));
  expect_resumed_at_step_5(dir, "resumed3_plain", last(dir, "part_plain"));
}

// The cross-rank config check covers the key: a rank started without sharding is refused.
TEST(ZeroSharding, RanksDisagreeingOnShardingAreRefused) {
  const auto dir = test::make_temp_dir("zero_config");
  const int port = test::free_port();
  auto rank = [&](int r, const std::string& extra) {
    return test::start("env RANK=" + std::to_string(r) + " WORLD_SIZE=2 LOCAL_RANK=" + std::to_string(r) +
                           " LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " +
                           train_args(dir / "out", "dist.timeout_s=10 " + extra),
                       dir / ("rank" + std::to_string(r) + ".log"));
  };
  const pid_t r0 = rank(0, "optim.zero_sharding=true"), r1 = rank(1, "dist.sharding=no_shard");
  const int rc1 = test::wait_for(r1, std::chrono::seconds(60)), rc0 = test::wait_for(r0, std::chrono::seconds(60));
  const std::string log1 = test::read_text(dir / "rank1.log");
  EXPECT_EQ(rc1, 2) << log1;
  EXPECT_NE(rc0, 0) << test::read_text(dir / "rank0.log");
  EXPECT_NE(rc0, -1) << "rank 0 hung";
  EXPECT_NE(log1.find("key 'dist.sharding' differs"), std::string::npos) << log1;
}

}  // namespace
}  // namespace cg
