// Sharded checkpoints (nn/sharded_checkpoint.h), several ranks simulated in one process: each
// rank's pieces (an even split of replicated state, or the slices a sharded optimizer steps) put
// back together give the full checkpoint's tensors bit for bit, at any world size; a save that did
// not finish leaves the previous generation loadable; and a damaged folder (no index, a missing,
// truncated, altered or foreign shard, an index pointing outside its folder) fails naming the file
// and rank, loading nothing.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/ops.h"
#include "nn/miniresnet.h"
#include "nn/sharded_checkpoint.h"
#include "support/paths.h"

namespace cg::nn {
namespace {
namespace fs = std::filesystem;

MiniResNetOptions tiny() {
  MiniResNetOptions o;
  o.in_channels = 1;
  o.widths = {4, 8};
  o.blocks = {1, 1};
  return o;
}

const AdamWOptions kAdamW{0.01f, 0.9f, 0.999f, 1e-8f, 0.05f};
const TrainingProgress kProgress{2, 5, 17, "adamw", "rng-state", "a: 1\n"};

// A forward and backward on a fixed batch: gradients in every parameter.
void backward(MiniResNet& model, uint64_t seed) {
  Generator gen(seed);
  Tensor x = Tensor::empty({4, 1, 8, 8});
  normal_(x, gen, 0, 1);
  ops::cross_entropy(model(x), Tensor::from_vector<int64_t>({1, 2, 3, 4}, {4})).backward();
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

void expect_same(const NamedTensors& want, const std::map<std::string, Tensor>& got, const std::string& what) {
  EXPECT_EQ(want.size(), got.size()) << what;
  for (const auto& [name, t] : want) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << what << ": '" << name << "' was not assembled";
    EXPECT_TRUE(same_bits(t, it->second)) << what << ": '" << name << "' differs";
  }
}

// A model two AdamW steps into training, and its optimizer.
struct Trained {
  Generator gen{3};
  MiniResNet model{tiny(), gen};
  AdamW opt{model.named_parameters(), kAdamW};
  Trained() {
    for (uint64_t s : {1, 2}) {
      backward(model, s);
      opt.step(0.01);
      opt.zero_grad();
    }
  }
};

// Every rank of `world` writes its pieces of `model`/`opt` (all ranks hold the same replicated
// state), then rank 0 the index.
void save_all_ranks(const fs::path& folder, const Module& model, const Optimizer& opt, int world) {
  const int64_t generation = next_generation(folder);
  std::vector<ShardFile> shards;
  for (int r = 0; r < world; ++r) shards.push_back(write_shard(folder, r, world, generation, local_pieces(model, opt, r, world)));
  write_shard_index(folder, generation, shards, progress_metadata(opt, kProgress));
}

uint32_t fingerprint(const Module& model, const Optimizer& opt) {
  uint32_t h = 2166136261u;
  auto add = [&](const Tensor& t) {
    const auto* p = static_cast<const unsigned char*>(t.raw_data());
    for (size_t i = 0; i < t.nbytes(); ++i) h = (h ^ p[i]) * 16777619u;
  };
  for (const auto& [name, t] : model.state_dict()) add(t);
  for (const auto& [name, t] : opt.state_tensors()) add(t);
  return h;
}

// The error loading `folder` into a fresh model gives, and that it changed nothing.
std::string load_error(const fs::path& folder) {
  Generator gen(11);
  MiniResNet model(tiny(), gen);
  AdamW opt(model.named_parameters(), kAdamW);
  const uint32_t before = fingerprint(model, opt);
  std::string error;
  try {
    load_checkpoint(folder.string(), model, opt);
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_EQ(fingerprint(model, opt), before) << "a failed load changed the model or optimizer: " << error;
  return error;
}

TEST(ShardedCheckpoint, EvenSplitsAtAnyWorldSizeAssembleTheFullStateAndLoad) {
  Trained t;
  for (int world : {1, 2, 3, 5}) {
    SCOPED_TRACE(world);
    const fs::path folder = test::make_temp_dir("sharded_even") / "last.shards";
    save_all_ranks(folder, t.model, t.opt, world);
    EXPECT_TRUE(is_sharded_checkpoint(folder));
    EXPECT_EQ(verify_sharded_checkpoint(folder).size(), size_t(world));
    const CheckpointContents c = read_sharded_checkpoint(folder);
    expect_same(t.model.state_dict(), c.model, "model");
    expect_same(t.opt.state_tensors(), c.optimizer, "optimizer");

    Generator other(99);
    MiniResNet restored(tiny(), other);
    AdamW restored_opt(restored.named_parameters(), kAdamW);
    const TrainingProgress p = load_checkpoint(folder.string(), restored, restored_opt);
    EXPECT_EQ(p.step, 17);
    EXPECT_EQ(p.rng_state, "rng-state");
    EXPECT_EQ(restored_opt.steps_taken(), 2);
    EXPECT_EQ(fingerprint(restored, restored_opt), fingerprint(t.model, t.opt));
  }
}

// Two ranks as ZeRO runs them: each optimizer steps its half of every parameter (the slices), so
// each rank's model is current only in its half. Their pieces together are the unsharded run's
// parameters and state, bit for bit.
TEST(ShardedCheckpoint, ShardedOptimizersSlicesAssembleTheUnshardedStep) {
  Trained reference;  // unsharded: the same two steps
  struct Rank {
    Generator gen{3};
    MiniResNet model{tiny(), gen};
    AdamW opt{model.named_parameters(), kAdamW};
  } ranks[2];
  for (uint64_t s : {1, 2}) {
    for (int r = 0; r < 2; ++r) {
      backward(ranks[r].model, s);
      std::vector<Optimizer::Slice> slices;
      for (auto& [name, p] : ranks[r].model.named_parameters()) {
        const int64_t n = p.numel(), begin = r == 0 ? 0 : n / 2, end = r == 0 ? n / 2 : n;
        if (end > begin)
          slices.push_back({name, {begin, end - begin}, p.view_at(begin, {end - begin}),
                            p.grad().view_at(begin, {end - begin})});
      }
      ranks[r].opt.shard(std::move(slices));
      ranks[r].opt.step(0.01);
      ranks[r].opt.zero_grad();
    }
    // The all-gather after the step: each rank receives the half the other one updated.
    auto p0 = ranks[0].model.named_parameters(), p1 = ranks[1].model.named_parameters();
    for (size_t i = 0; i < p0.size(); ++i) {
      const int64_t n = p0[i].second.numel(), half = n / 2;
      if (half > 0) p1[i].second.view_at(0, {half}).copy_(p0[i].second.view_at(0, {half}));
      p0[i].second.view_at(half, {n - half}).copy_(p1[i].second.view_at(half, {n - half}));
    }
  }
  const fs::path folder = test::make_temp_dir("sharded_zero") / "last.shards";
  std::vector<ShardFile> shards;
  for (int r = 0; r < 2; ++r) shards.push_back(write_shard(folder, r, 2, 1, local_pieces(ranks[r].model, ranks[r].opt, r, 2)));
  write_shard_index(folder, 1, shards, progress_metadata(ranks[0].opt, kProgress));
  const CheckpointContents c = read_sharded_checkpoint(folder);
  expect_same(reference.model.state_dict(), c.model, "model");
  expect_same(reference.opt.state_tensors(), c.optimizer, "optimizer");
}

// A save whose index was never written (a rank failed, or the job was killed) leaves the previous
// generation whole; the next complete save removes the older generation's files.
TEST(ShardedCheckpoint, UnfinishedSaveLeavesThePreviousGenerationLoadable) {
  Trained t;
  const fs::path folder = test::make_temp_dir("sharded_gen") / "last.shards";
  save_all_ranks(folder, t.model, t.opt, 2);
  ASSERT_EQ(next_generation(folder), 2);
  Trained later;
  backward(later.model, 7);
  later.opt.step(0.01);
  write_shard(folder, 0, 2, 2, local_pieces(later.model, later.opt, 0, 2));  // rank 1 never wrote
  Generator gen(11);
  MiniResNet model(tiny(), gen);
  AdamW opt(model.named_parameters(), kAdamW);
  load_checkpoint(folder.string(), model, opt);
  EXPECT_EQ(fingerprint(model, opt), fingerprint(t.model, t.opt)) << "the folder no longer holds generation 1";

  save_all_ranks(folder, later.model, later.opt, 3);  // generation 2, three ranks
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(folder)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"index.json", "rank0-gen2.safetensors", "rank1-gen2.safetensors",
                                             "rank2-gen2.safetensors"}));
  load_checkpoint(folder.string(), model, opt);
  EXPECT_EQ(fingerprint(model, opt), fingerprint(later.model, later.opt));
}

fs::path saved_folder(const std::string& name, int world = 2) {
  static Trained t;
  const fs::path folder = test::make_temp_dir(name) / "last.shards";
  save_all_ranks(folder, t.model, t.opt, world);
  return folder;
}

void expect_error(const std::string& error, std::initializer_list<std::string> parts) {
  EXPECT_FALSE(error.empty()) << "the damaged checkpoint loaded";
  for (const std::string& p : parts) EXPECT_NE(error.find(p), std::string::npos) << "'" << p << "' not in: " << error;
}

TEST(ShardedCheckpoint, MissingIndexOrShardIsNamed) {
  fs::path folder = saved_folder("sharded_no_index");
  fs::remove(folder / "index.json");
  expect_error(load_error(folder), {folder.string(), "index.json is missing", "written last"});
  folder = saved_folder("sharded_no_shard");
  fs::remove(folder / "rank1-gen1.safetensors");
  expect_error(load_error(folder), {folder.string(), "rank 1's shard rank1-gen1.safetensors is missing"});
}

TEST(ShardedCheckpoint, TruncatedOrAlteredShardIsNamed) {
  fs::path folder = saved_folder("sharded_trunc");
  const fs::path shard = folder / "rank1-gen1.safetensors";
  fs::resize_file(shard, fs::file_size(shard) - 3);
  expect_error(load_error(folder), {"rank 1's shard rank1-gen1.safetensors", "truncated"});
  folder = saved_folder("sharded_flip");
  {
    std::fstream f(folder / "rank0-gen1.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x7f');
  }
  expect_error(load_error(folder), {"rank 0's shard rank0-gen1.safetensors", "CRC-32"});
}

// A shard from another save passes its own checksum, and even an index rewritten to match it: the
// pieces then do not tile their tensors, and the load says so.
TEST(ShardedCheckpoint, ShardOfAnotherWorldSizeIsRefusedEvenWithAMatchingIndex) {
  const fs::path folder = saved_folder("sharded_mix", 2), other = saved_folder("sharded_mix3", 3);
  fs::copy_file(other / "rank1-gen1.safetensors", folder / "rank1-gen1.safetensors",
                fs::copy_options::overwrite_existing);
  expect_error(load_error(folder), {"rank 1's shard rank1-gen1.safetensors"});  // the index's size or CRC
  nlohmann::json index = nlohmann::json::parse(std::ifstream(folder / "index.json"));
  std::ifstream other_index(other / "index.json");
  index["shards"][1] = nlohmann::json::parse(other_index)["shards"][1];
  std::ofstream(folder / "index.json") << index.dump();
  expect_error(load_error(folder), {folder.string(), "do not fit together"});
}

TEST(ShardedCheckpoint, MalformedIndexOrOneReachingOutsideItsFolderIsRefused) {
  fs::path folder = saved_folder("sharded_bad_index");
  std::ofstream(folder / "index.json") << "{\"format\": \"cudagrad.sharded_checkpoint\", \"generation\": ";
  expect_error(load_error(folder), {"index.json is malformed"});
  folder = saved_folder("sharded_outside");
  nlohmann::json index = nlohmann::json::parse(std::ifstream(folder / "index.json"));
  index["shards"][0]["file"] = "../elsewhere.safetensors";
  std::ofstream(folder / "index.json") << index.dump();
  expect_error(load_error(folder), {"is not rank 0's file in this folder"});
  index["shards"][0]["file"] = "rank0-gen1.safetensors";
  index["world_size"] = 3;
  std::ofstream(folder / "index.json") << index.dump();
  expect_error(load_error(folder), {"lists 2 shard files for a world size of 3"});
}

}  // namespace
}  // namespace cg::nn
