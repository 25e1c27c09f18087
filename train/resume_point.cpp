#include "train/resume_point.h"

#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include "train/checkpoint_files.h"
#include "util/atomic_file.h"
#include "util/check.h"
#include "util/log.h"
#include "util/safetensors.h"

namespace cg::train {
namespace fs = std::filesystem;
namespace {

// The whole file, or nullopt when it cannot be read.
std::optional<std::string> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return std::move(bytes).str();
}

uint32_t crc_of(const std::string& bytes) {
  return uint32_t(crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

// Why `path` cannot be resumed from ("" when it verifies as a training checkpoint).
std::string why_unusable(const fs::path& path) {
  try {
    const safetensors::File f = safetensors::load(path.string());
    auto kind = f.metadata.find("cudagrad.kind");
    if (kind == f.metadata.end() || kind->second != "training_checkpoint") return "not a cudagrad training checkpoint";
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

// What rank 0 tells every rank: a checkpoint's name and contents' size and CRC, none, or an error.
struct Choice {
  enum Kind : char { none = 'N', found = 'F', failed = 'E' } kind = none;
  std::string path;  // rank 0's path (the error's text for `failed`)
  uint64_t size = 0;
  uint32_t crc = 0;

  std::string encode() const { return fmt::format("{}\n{}\n{}\n{}", char(kind), size, crc, path); }
  static Choice decode(const std::string& text) {
    Choice c;
    std::istringstream in(text);
    std::string kind;
    std::getline(in, kind);
    c.kind = Kind(kind.empty() ? 'E' : kind[0]);
    in >> c.size >> c.crc;
    in.ignore(1);
    std::getline(in, c.path, '\0');
    return c;
  }
};

// Rank 0's choice, and the chosen file's bytes.
Choice choose_on_rank0(const fs::path& dir, const std::string& resume_from, bool restarted, std::string& bytes) {
  Choice c;
  std::vector<fs::path> candidates;
  if (!resume_from.empty()) candidates.push_back(resume_from);
  else if (restarted) candidates = trainer_checkpoints(dir);
  for (const fs::path& path : candidates) {
    const std::string why = why_unusable(path);
    std::optional<std::string> read = why.empty() ? read_bytes(path) : std::nullopt;
    if (read) {
      bytes = std::move(*read);
      return {Choice::found, path.string(), bytes.size(), crc_of(bytes)};
    }
    if (!resume_from.empty())
      return {Choice::failed, fmt::format("checkpoint.resume_from={} cannot be resumed from on rank 0: {}", path.string(),
                                          why.empty() ? "it cannot be read" : why)};
    log::warn("restart: skipping checkpoint {}: {}; trying the one before it", path.string(), why);
  }
  if (restarted && !candidates.empty())
    return {Choice::failed, fmt::format("restart: none of the {} checkpoints in {} on rank 0 can be resumed from "
                                        "(each is named above)", candidates.size(), dir.string())};
  return c;
}

}  // namespace

std::string agree_on_resume_checkpoint(DistContext& dist, const fs::path& checkpoint_dir,
                                       const std::string& resume_from, bool restarted) {
  std::string bytes, message;
  if (dist.rank() == 0) message = choose_on_rank0(checkpoint_dir, resume_from, restarted, bytes).encode();
  dist.broadcast_from_rank0(message);
  const Choice choice = Choice::decode(message);
  if (choice.kind == Choice::failed) throw Error(choice.path);
  if (choice.kind == Choice::none) return "";
  const bool root = dist.rank() == 0;

  // This rank's copy: the same path, or the same name in its own checkpoint folder.
  const fs::path mine = root ? fs::path(choice.path)
                       : resume_from.empty() ? checkpoint_dir / fs::path(choice.path).filename()
                                             : fs::path(resume_from);
  const std::optional<std::string> local = root ? std::nullopt : read_bytes(mine);
  const bool identical = root || (local && local->size() == choice.size && crc_of(*local) == choice.crc);
  if (!dist.any_rank(!identical)) return mine.string();
  dist.broadcast_from_rank0(bytes);  // every rank takes part; those with a copy drop it
  if (identical) return mine.string();
  CG_CHECK(bytes.size() == choice.size && crc_of(bytes) == choice.crc,
           "resume: the checkpoint received from rank 0 ({} bytes) does not match what rank 0 announced", bytes.size());
  // A received copy goes into this rank's own checkpoint folder (never over a user's resume_from).
  const fs::path into = checkpoint_dir / fs::path(choice.path).filename();
  std::error_code ec;
  fs::create_directories(checkpoint_dir, ec);
  write_file_atomically(into.string(), bytes);
  log::warn("resume: rank {} had {} of {}; received rank 0's copy into {}", dist.rank(),
            local ? "a different copy" : "no copy", choice.path, into.string());
  return into.string();
}

std::filesystem::path checkpoint_dir(const TrainConfig& c) {
  return c.checkpoint.dir.empty() ? std::filesystem::path(c.output.dir) / "checkpoints"
                                  : std::filesystem::path(c.checkpoint.dir);
}

std::string decide_resume(const TrainConfig& c, DistContext& dist) {
  // On rank 0 only: the others may have no copy and receive rank 0's.
  if (const std::string& from = c.checkpoint.resume_from;
      !from.empty() && dist.rank() == 0 && !std::filesystem::is_regular_file(from))
    throw Error(fmt::format("checkpoint.resume_from={}: {}", from,
                            std::filesystem::is_directory(from) ? "a folder, not a checkpoint file" : "no such file"));
  return agree_on_resume_checkpoint(dist, checkpoint_dir(c), c.checkpoint.resume_from, restarted_by_launcher());
}

}  // namespace cg::train
