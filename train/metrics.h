// metrics.jsonl: one JSON object per line, appended and flushed as training goes, so a crashed or
// interrupted run keeps every line it logged. Rank 0 writes; other ranks hold a disabled writer.
// A line that cannot be written (a full disk, a removed mount) stops the run with the path and the
// cause: losing lines silently would lose the resume records that show where each run took over.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>
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
  // Appends one line and flushes it to the operating system; throws cg::Error naming the file and
  // the cause when either fails.
  void write(const nlohmann::json& record);
  bool enabled() const { return file_ != nullptr; }

 private:
  std::string path_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_{nullptr, &std::fclose};
};

}  // namespace cg::train
