#include "apps/common/metrics.h"

#include "util/check.h"

namespace cg::apps {

MetricsWriter::MetricsWriter(const std::string& path, bool append)
    : out_(path, append ? std::ios::app : std::ios::trunc) {
  if (!out_) throw Error(fmt::format("cannot open metrics file {}: {}", path, std::strerror(errno)));
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (!enabled()) return;
  out_ << record.dump() << '\n';
  out_.flush();
}

}  // namespace cg::apps
