// metrics.jsonl: one JSON object per line, appended and flushed as training goes, so a crashed or
// interrupted run keeps every line it logged. Rank 0 writes; other ranks hold a disabled writer.
#pragma once
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

namespace cg::train {

class MetricsWriter {
 public:
  enum class Mode {
    truncate,  // start the file afresh
    append,    // keep the lines of an earlier run (resume)
  };
  MetricsWriter() = default;  // disabled
  MetricsWriter(const std::string& path, Mode mode);
  void write(const nlohmann::json& record);
  bool enabled() const { return out_.is_open(); }

 private:
  std::ofstream out_;
};

}  // namespace cg::train
