#include "train/checkpoint_files.h"

#include <zlib.h>

#include <cstdlib>

namespace cg::train {
namespace fs = std::filesystem;

bool restarted_by_launcher() {
  const char* v = std::getenv("CUDAGRAD_RESTART");
  return v && std::atoi(v) > 0;
}

std::string latest_checkpoint(const fs::path& dir) {
  std::string best;
  fs::file_time_type best_time{};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".safetensors") continue;
    const auto t = e.last_write_time(ec);
    if (best.empty() || t > best_time) {
      best = e.path().string();
      best_time = t;
    }
  }
  return best;
}

uint32_t state_fingerprint(const nn::Module& model) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (const auto& [name, live] : model.state_dict()) {
    const Tensor t = live.to(Device::cpu());
    crc = crc32(crc, static_cast<const Bytef*>(t.raw_data()), uInt(t.nbytes()));
  }
  return uint32_t(crc);
}

}  // namespace cg::train
