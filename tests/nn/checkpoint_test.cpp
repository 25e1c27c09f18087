// Checkpoints: a save/load round trip restores model and optimizer exactly; damaged files fail
// with errors that name the cause; hostile files (valid checksums over contents that do not fit)
// are refused before anything is loaded or any step can write through them.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "engine/ops.h"
#include "nn/checkpoint.h"
#include "nn/miniresnet.h"
#include "support/paths.h"
#include "util/safetensors.h"

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

// ---- Hostile checkpoints: contents rewritten with a valid checksum, so only the checks of what
// the contents mean stand between them and the optimizer's kernels.

// Loads `path`, lets `edit` change it, and saves it back (save() adds a valid checksum).
template <typename Edit>
void rewrite(const std::string& path, Edit edit) {
  safetensors::File file = safetensors::load(path);
  edit(file);
  safetensors::save(path, file);
}

// The first optimizer tensor whose name starts with `prefix` ("optim.momentum_buffer.").
safetensors::TensorRecord& optim_record(safetensors::File& file, const std::string& prefix) {
  for (auto& [name, r] : file.tensors)
    if (name.rfind(prefix, 0) == 0) return r;
  throw Error("test: the checkpoint has no tensor " + prefix + "*");
}

safetensors::TensorRecord f32_record(std::vector<int64_t> shape, std::vector<float> values) {
  safetensors::TensorRecord r;
  r.dtype = "F32";
  r.shape = std::move(shape);
  r.bytes.resize(values.size() * sizeof(float));
  if (!values.empty()) std::memcpy(r.bytes.data(), values.data(), r.bytes.size());
  return r;
}

// Loads into a fresh model and optimizer; returns the error (or "" when it loaded) and checks that
// a refused load left the model's weights and the optimizer's state as they were.
template <typename Opt, typename Hyper>
std::string hostile_load_error(const std::string& path, const Hyper& hyper) {
  Generator gen(0);
  MiniResNet model(tiny(), gen);
  Opt opt(model.named_parameters(), hyper);
  const NamedTensors before = model.state_dict();
  std::vector<Tensor> copies;
  for (const auto& [name, t] : before) copies.push_back(t.clone());
  try {
    load_checkpoint(path, model, opt);
  } catch (const Error& e) {
    for (size_t i = 0; i < before.size(); ++i)
      EXPECT_TRUE(same_bits(before[i].second, copies[i])) << before[i].first << " changed by a refused load";
    EXPECT_TRUE(opt.state_tensors().empty()) << "a refused load kept optimizer state";
    return e.what();
  }
  return "";
}

std::string sgd_load_error(const std::string& path) {
  return hostile_load_error<SGD>(path, SgdOptions{0.1f, 0.9f, 1e-4f, 0.f, true});
}

void expect_refused(const std::string& err, const std::string& path, const std::string& cause) {
  EXPECT_NE(err.find(path), std::string::npos) << err;
  EXPECT_NE(err.find(cause), std::string::npos) << "expected '" << cause << "' in: " << err;
}

// A momentum buffer of one element for a convolution weight: the first SGD step after the resume
// would write numel(weight) floats into it.
TEST(HostileCheckpoint, MomentumBufferOfWrongShapeIsRefused) {
  auto dir = test::make_temp_dir("ckpt_momentum");
  const std::string path = write_checkpoint(dir);
  rewrite(path, [](safetensors::File& f) { optim_record(f, "optim.momentum_buffer.") = f32_record({1}, {0.f}); });
  expect_refused(sgd_load_error(path), path, "has shape [1], but its parameter has");
}

TEST(HostileCheckpoint, StateOfAnotherDtypeOrUnknownNameIsRefused) {
  auto dir = test::make_temp_dir("ckpt_state_dtype");
  std::string path = write_checkpoint(dir);
  rewrite(path, [](safetensors::File& f) {
    safetensors::TensorRecord& r = optim_record(f, "optim.momentum_buffer.");
    r.dtype = "I32";  // same byte count, same shape: only the dtype is wrong
  });
  expect_refused(sgd_load_error(path), path, "must be float32");

  path = write_checkpoint(dir);
  rewrite(path, [](safetensors::File& f) { f.tensors.emplace_back("optim.momentum_buffer.no_such_param", f32_record({}, {0.f})); });
  expect_refused(sgd_load_error(path), path, "'momentum_buffer.no_such_param' is not one of sgd's");
}

// AdamW's per-parameter step counter is read through element 0 and drives the bias correction.
TEST(HostileCheckpoint, AdamWStepCounterMustBeAWholeScalarCount) {
  auto dir = test::make_temp_dir("ckpt_adamw_step");
  const std::string path = (dir / "adamw.safetensors").string();
  const AdamWOptions hyper{};
  auto save_adamw = [&] {
    Generator gen(3);
    MiniResNet model(tiny(), gen);
    AdamW opt(model.named_parameters(), hyper);
    train_one_step(model, opt, gen);
    save_checkpoint(path, model, opt, {0, 1, 1, "adamw", gen.state(), ""});
  };
  save_adamw();
  EXPECT_EQ(hostile_load_error<AdamW>(path, hyper), "") << "the unedited checkpoint must load";
  struct Case {
    safetensors::TensorRecord step;
    const char* cause;
  };
  const float inf = std::numeric_limits<float>::infinity();
  for (const Case& c : {Case{f32_record({0}, {}), "a step counter is a scalar"},
                        Case{f32_record({2}, {1.f, 1.f}), "a step counter is a scalar"},
                        Case{f32_record({}, {inf}), "is not a step count"},
                        Case{f32_record({}, {-1.f}), "is not a step count"},
                        Case{f32_record({}, {1.5f}), "is not a step count"}}) {
    save_adamw();
    rewrite(path, [&](safetensors::File& f) { optim_record(f, "optim.step.") = c.step; });
    expect_refused(hostile_load_error<AdamW>(path, hyper), path, c.cause);
  }
}

// save() always writes the format tag, and with it the checksum: a training checkpoint without
// them was edited afterwards, and nothing in it was verified.
TEST(HostileCheckpoint, TrainingCheckpointWithoutItsChecksumIsRefused) {
  auto dir = test::make_temp_dir("ckpt_no_crc");
  const std::string path = write_checkpoint(dir);
  safetensors::File file = safetensors::load(path);
  file.metadata.erase(safetensors::kFormatKey);
  file.metadata.erase(safetensors::kChecksumKey);
  // Written by hand, as another tool would: an 8-byte header length, the JSON header, the data.
  nlohmann::ordered_json header;
  uint64_t offset = 0;
  for (const auto& [name, r] : file.tensors) {
    header[name] = {{"dtype", r.dtype}, {"shape", r.shape}, {"data_offsets", {offset, offset + r.bytes.size()}}};
    offset += r.bytes.size();
  }
  header["__metadata__"] = file.metadata;
  const std::string text = header.dump();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const uint64_t n = text.size();
  out.write(reinterpret_cast<const char*>(&n), 8);  // little-endian on every machine we build for
  out << text;
  for (const auto& [name, r] : file.tensors) out.write(reinterpret_cast<const char*>(r.bytes.data()), std::streamsize(r.bytes.size()));
  out.close();
  ASSERT_NO_THROW(safetensors::load(path)) << "the hand-written file is valid safetensors";
  expect_refused(sgd_load_error(path), path, "without cudagrad.format");
}

TEST(HostileCheckpoint, CountersAndLossScaleOutOfRangeAreRefused) {
  auto dir = test::make_temp_dir("ckpt_counters");
  struct Case {
    const char* key;
    const char* value;
    const char* cause;
  };
  for (const Case& c : {Case{"cudagrad.epoch", "-1", "is not a count"},
                        Case{"cudagrad.step", "12abc", "is not a count"},
                        Case{"cudagrad.batch_in_epoch", "99999999999999999999", "is not a count"},
                        Case{"cudagrad.optimizer_steps", "-5", "is not a count"},
                        Case{"cudagrad.loss_scale", "inf", "not a positive finite number"},
                        Case{"cudagrad.loss_scale", "nan", "not a positive finite number"}}) {
    const std::string path = write_checkpoint(dir);
    rewrite(path, [&](safetensors::File& f) {
      f.metadata[c.key] = c.value;
      f.metadata.emplace("cudagrad.loss_scale_growth_tracker", "0");
    });
    expect_refused(sgd_load_error(path), path, c.cause);
  }
}

TEST(HostileCheckpoint, ModelTensorOfAnotherDtypeIsRefused) {
  auto dir = test::make_temp_dir("ckpt_model_dtype");
  const std::string path = write_checkpoint(dir);
  rewrite(path, [](safetensors::File& f) {
    for (auto& [name, r] : f.tensors)
      if (r.dtype == "F32" && name.rfind("optim.", 0) != 0) {
        r.dtype = "I32";
        return;
      }
  });
  expect_refused(sgd_load_error(path), path, "is int32, the model's is float32");
}

}  // namespace
}  // namespace cg::nn
