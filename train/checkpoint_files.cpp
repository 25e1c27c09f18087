#include "train/checkpoint_files.h"

#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <regex>

namespace cg::train {
namespace fs = std::filesystem;

bool restarted_by_launcher() {
  const char* v = std::getenv("CUDAGRAD_RESTART");
  return v && std::atoi(v) > 0;
}

std::vector<fs::path> trainer_checkpoints(const fs::path& dir) {
  // A file of checkpoint.format=full, or a folder of checkpoint.format=sharded (nn/sharded_checkpoint.h;
  // a folder's time is its last change: the index written last, the old files removed).
  static const std::regex file_name(R"((last|epoch_[0-9]+)\.safetensors)"), folder_name(R"((last|epoch_[0-9]+)\.shards)");
  std::vector<std::pair<fs::file_time_type, fs::path>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool file = e.is_regular_file(ec) && std::regex_match(name, file_name);
    if (!file && !(e.is_directory(ec) && std::regex_match(name, folder_name))) continue;
    found.emplace_back(e.last_write_time(ec), e.path());
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<fs::path> paths;
  for (auto& [time, path] : found) paths.push_back(std::move(path));
  return paths;
}

std::string latest_checkpoint(const fs::path& dir) {
  const std::vector<fs::path> all = trainer_checkpoints(dir);
  return all.empty() ? std::string() : all.front().string();
}

namespace {
uLong add_bytes(uLong crc, const Tensor& live) {
  const Tensor t = live.to(Device::cpu());
  return crc32_z(crc, static_cast<const Bytef*>(t.raw_data()), t.nbytes());
}
}  // namespace

uint32_t state_fingerprint(const nn::Module& model) { return state_fingerprint(model.state_dict()); }

uint32_t state_fingerprint(const nn::NamedTensors& state) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (const auto& [name, t] : state) crc = add_bytes(crc, t);
  return uint32_t(crc);
}

uint32_t state_fingerprint(const nn::Module& model, const nn::Optimizer& optimizer) {
  uLong crc = state_fingerprint(model);
  for (const auto& [name, t] : optimizer.state_tensors()) crc = add_bytes(crc, t);
  return uint32_t(crc);
}

}  // namespace cg::train
