// Checkpoints: a save/load round trip restores model and optimizer exactly; damaged files fail
// with errors that name the cause.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/ops.h"
#include "nn/checkpoint.h"
#include "nn/miniresnet.h"
#include "support/paths.h"

namespace cg::nn {
namespace {

MiniResNetOptions tiny() {
  MiniResNetOptions o;
  o.in_channels = 1;
  o.widths = {4, 8};
  o.blocks = {1, 1};
  return o;
}

void train_one_step(MiniResNet& model, Optimizer& opt, Generator& gen) {
  Tensor x = Tensor::empty({4, 1, 8, 8});
  normal_(x, gen, 0, 1);
  ops::cross_entropy(model(x), Tensor::from_vector<int64_t>({1, 2, 3, 4}, {4})).backward();
  opt.step(0.1);
  opt.zero_grad();
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

// A model and optimizer one step into training, saved to dir/ckpt.safetensors.
struct Saved {
  Generator gen{3};
  MiniResNet model{tiny(), gen};
  SGD opt{model.named_parameters(), {0.1f, 0.9f, 1e-4f, 0.f, true}};
  std::string path;
  explicit Saved(const std::filesystem::path& dir) : path((dir / "ckpt.safetensors").string()) {
    train_one_step(model, opt, gen);
    save_checkpoint(path, model, opt, {2, 5, 17, "sgd", gen.state(), "a: 1\n"});
  }
};

std::string write_checkpoint(const std::filesystem::path& dir) { return Saved(dir).path; }

TEST(Checkpoint, RoundTripRestoresModelOptimizerAndProgress) {
  auto dir = test::make_temp_dir("ckpt");
  Saved saved(dir);
  auto& [gen, model, opt, path] = saved;

  Generator other(99);
  MiniResNet restored(tiny(), other);
  SGD restored_opt(restored.named_parameters(), {0.1f, 0.9f, 1e-4f, 0.f, true});
  TrainingProgress p = load_checkpoint(path, restored, restored_opt);
  EXPECT_EQ(p.epoch, 2);
  EXPECT_EQ(p.batch_in_epoch, 5);
  EXPECT_EQ(p.step, 17);
  EXPECT_EQ(p.optimizer, "sgd");
  EXPECT_EQ(p.config_yaml, "a: 1\n");
  EXPECT_EQ(p.rng_state, gen.state());
  auto a = model.state_dict(), b = restored.state_dict();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bits(a[i].second, b[i].second)) << a[i].first;
  auto sa = opt.state_tensors(), sb = restored_opt.state_tensors();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) EXPECT_TRUE(same_bits(sa[i].second, sb[i].second)) << sa[i].first;

  // One more identical step on both gives identical weights: nothing the update needs was lost.
  Generator g1(5), g2(5);
  train_one_step(model, opt, g1);
  train_one_step(restored, restored_opt, g2);
  a = model.state_dict();
  b = restored.state_dict();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(same_bits(a[i].second, b[i].second)) << a[i].first;
}

std::string load_error(const std::string& path) {
  Generator gen(0);
  MiniResNet model(tiny(), gen);
  SGD opt(model.named_parameters(), {});
  try {
    load_checkpoint(path, model, opt);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Checkpoint, TruncatedFileFailsNamingIt) {
  auto dir = test::make_temp_dir("ckpt_trunc");
  const std::string path = write_checkpoint(dir);
  const auto size = std::filesystem::file_size(path);
  for (auto keep : {size_t(4), size_t(size / 3), size_t(size - 1)}) {
    std::filesystem::resize_file(path, keep);
    const std::string err = load_error(path);
    EXPECT_NE(err.find(path), std::string::npos) << "cut at " << keep << ": " << err;
    write_checkpoint(dir);
  }
}

TEST(Checkpoint, FlippedByteFailsTheChecksum) {
  auto dir = test::make_temp_dir("ckpt_flip");
  const std::string path = write_checkpoint(dir);
  const auto size = std::filesystem::file_size(path);
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(std::streamoff(size - 10));
    char c;
    f.read(&c, 1);
    c ^= 0x5a;
    f.seekp(std::streamoff(size - 10));
    f.write(&c, 1);
  }
  EXPECT_NE(load_error(path).find("checksum"), std::string::npos) << load_error(path);
}

TEST(Checkpoint, MissingFileAndWrongModelAreClearErrors) {
  EXPECT_NE(load_error("/nonexistent/ckpt.safetensors").find("/nonexistent/ckpt.safetensors"),
            std::string::npos);
  auto dir = test::make_temp_dir("ckpt_model");
  const std::string path = write_checkpoint(dir);
  Generator gen(0);
  MiniResNetOptions o = tiny();
  o.widths = {4, 16};
  MiniResNet wider(o, gen);
  SGD opt(wider.named_parameters(), {});
  try {
    load_checkpoint(path, wider, opt);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shape"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cg::nn
