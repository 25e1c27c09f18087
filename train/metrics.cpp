#include "train/metrics.h"

#include <cerrno>
#include <cstring>

#include "util/check.h"

namespace cg::train {

MetricsWriter::MetricsWriter(const std::string& path, Mode mode)
    : path_(path), file_(std::fopen(path.c_str(), mode == Mode::append ? "a" : "w"), &std::fclose) {
  if (!file_) throw Error(fmt::format("cannot open metrics file {}: {}", path, std::strerror(errno)));
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (!enabled()) return;
  const std::string line = record.dump() + '\n';
  // fwrite may only buffer; the flush is where a full disk shows.
  if (std::fwrite(line.data(), 1, line.size(), file_.get()) != line.size() || std::fflush(file_.get()) != 0)
    throw Error(fmt::format("cannot write the metrics file {}: {}; stopping rather than losing its lines", path_,
                            std::strerror(errno)));
}

}  // namespace cg::train
