#include "train/metrics.h"

#include "util/check.h"

namespace cg::train {

MetricsWriter::MetricsWriter(const std::string& path, Mode mode)
    : out_(path, mode == Mode::append ? std::ios::app : std::ios::trunc) {
  if (!out_) throw Error(fmt::format("cannot open metrics file {}: {}", path, std::strerror(errno)));
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (!enabled()) return;
  out_ << record.dump() << '\n';
  out_.flush();
}

}  // namespace cg::train
