#include "train/resume_point.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "nn/sharded_checkpoint.h"
#include "train/checkpoint_files.h"
#include "util/atomic_file.h"
#include "util/check.h"
#include "util/file_bytes.h"
#include "util/log.h"
#include "util/safetensors.h"

namespace cg::train {
namespace fs = std::filesystem;
namespace {

// Why `path` cannot be resumed from ("" when it verifies as a training checkpoint, or as a sharded
// checkpoint's folder whose every file is there, of its size and CRC).
std::string why_unusable(const fs::path& path) {
  try {
    if (fs::is_directory(path)) {
      nn::verify_sharded_checkpoint(path);
      return "";
    }
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
  enum Kind : char { none = 'N', found = 'F', found_folder = 'S', failed = 'E' } kind = none;
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
  if (!resume_from.empty()) {
    const fs::path from(resume_from);
    candidates.push_back(from.has_filename() ? from : from.parent_path());  // "ckpt/last.shards/" too
  }
  else if (restarted) candidates = trainer_checkpoints(dir);
  for (const fs::path& path : candidates) {
    const std::string why = why_unusable(path);
    // A folder's identity is its index: it names every other file with its size and CRC.
    const fs::path identity = fs::is_directory(path) ? path / nn::kShardIndexName : path;
    std::optional<std::string> read = why.empty() ? read_whole_file(identity) : std::nullopt;
    if (read) {
      bytes = std::move(*read);
      return {fs::is_directory(path) ? Choice::found_folder : Choice::found, path.string(), bytes.size(), crc32_of(bytes)};
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

// This rank's copy of the chosen checkpoint: the same path, or the same name in its own checkpoint
// folder; whether it is there, and whether it is rank 0's (by size and CRC of the file, or of a
// folder's index with every file it names verified).
struct LocalCopy {
  fs::path path;
  bool found = false, identical = false;
};
LocalCopy local_copy(bool root, const Choice& choice, const fs::path& checkpoint_dir, const std::string& resume_from) {
  if (root) return {fs::path(choice.path), true, true};
  LocalCopy c;
  c.path = resume_from.empty() ? checkpoint_dir / fs::path(choice.path).filename() : fs::path(resume_from);
  const bool folder = choice.kind == Choice::found_folder;
  const std::optional<std::string> bytes = read_whole_file(folder ? c.path / nn::kShardIndexName : c.path);
  c.found = bytes.has_value();
  c.identical = bytes && bytes->size() == choice.size && crc32_of(*bytes) == choice.crc &&
                (!folder || why_unusable(c.path).empty());
  return c;
}

// Rank 0's `bytes` (the checkpoint file) on every rank; written atomically to `into` where it is
// not empty (a rank without an identical copy).
void receive_file(DistContext& dist, const Choice& choice, std::string& bytes, const fs::path& into) {
  dist.broadcast_from_rank0(bytes);  // every rank takes part; those with a copy drop it
  if (into.empty()) return;
  CG_CHECK(bytes.size() == choice.size && crc32_of(bytes) == choice.crc,
           "resume: the checkpoint received from rank 0 ({} bytes) does not match what rank 0 announced", bytes.size());
  std::error_code ec;
  fs::create_directories(into.parent_path(), ec);
  write_file_atomically(into.string(), bytes);
}

// A sharded checkpoint's folder from rank 0, file by file in the index's order, the index (rank 0's
// `bytes`) last; each file checked against the index before it is written.
void receive_folder(DistContext& dist, const Choice& choice, std::string& index_bytes, const fs::path& into) {
  dist.broadcast_from_rank0(index_bytes);
  if (!into.empty())
    CG_CHECK(index_bytes.size() == choice.size && crc32_of(index_bytes) == choice.crc,
             "resume: the shard index received from rank 0 does not match what rank 0 announced");
  // Rank 0 verified its folder as it chose it: the entries are what every rank's copy must hold.
  std::string listing;
  if (dist.rank() == 0)
    for (const nn::ShardFile& f : nn::shard_index(choice.path))
      listing += fmt::format("{}\n{}\n{}\n", f.file, f.bytes, f.crc);
  dist.broadcast_from_rank0(listing);
  std::istringstream entries(listing);
  std::string name;
  uint64_t size = 0;
  uint32_t crc = 0;
  while (std::getline(entries, name) && entries >> size >> crc && entries.ignore(1)) {
    std::string bytes;
    if (dist.rank() == 0) bytes = read_whole_file(fs::path(choice.path) / name).value_or("");
    dist.broadcast_from_rank0(bytes);
    if (into.empty()) continue;
    CG_CHECK(bytes.size() == size && crc32_of(bytes) == crc, "resume: shard {} received from rank 0 ({} bytes) does not "
             "match its index", name, bytes.size());
    write_file_atomically((into / name).string(), bytes);
  }
  if (!into.empty()) write_file_atomically((into / nn::kShardIndexName).string(), index_bytes);
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
  const bool folder = choice.kind == Choice::found_folder;
  const LocalCopy copy = local_copy(dist.rank() == 0, choice, checkpoint_dir, resume_from);
  if (!dist.any_rank(!copy.identical)) return copy.path.string();
  // A received copy goes into this rank's own checkpoint folder (never over a user's resume_from).
  const fs::path into = checkpoint_dir / fs::path(choice.path).filename();
  if (folder) receive_folder(dist, choice, bytes, copy.identical ? fs::path() : into);
  else receive_file(dist, choice, bytes, copy.identical ? fs::path() : into);
  if (copy.identical) return copy.path.string();
  log::warn("resume: rank {} had {} of {}; received rank 0's copy into {}", dist.rank(),
            copy.found ? "a different copy" : "no copy", choice.path, into.string());
  return into.string();
}

std::filesystem::path checkpoint_dir(const TrainConfig& c) {
  return c.checkpoint.dir.empty() ? std::filesystem::path(c.output.dir) / "checkpoints"
                                  : std::filesystem::path(c.checkpoint.dir);
}

std::string decide_resume(const TrainConfig& c, DistContext& dist) {
  // On rank 0 only: the others may have no copy and receive rank 0's.
  if (const std::string& from = c.checkpoint.resume_from;
      !from.empty() && dist.rank() == 0 && !std::filesystem::is_regular_file(from) && !nn::is_sharded_checkpoint(from))
    throw Error(fmt::format("checkpoint.resume_from={}: {}", from,
                            std::filesystem::is_directory(from)
                                ? fmt::format("a folder without {}: neither a checkpoint file nor a complete sharded "
                                              "checkpoint (the index is written last)", nn::kShardIndexName)
                                : "no such file"));
  return agree_on_resume_checkpoint(dist, checkpoint_dir(c), c.checkpoint.resume_from, restarted_by_launcher());
}

}  // namespace cg::train
