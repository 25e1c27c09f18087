#include "nn/sharded_checkpoint.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <regex>

#include "util/atomic_file.h"
#include "util/file_bytes.h"
#include "util/safetensors.h"

namespace cg::nn {
namespace fs = std::filesystem;
namespace {

using nlohmann::json;
constexpr const char* kOptimPrefix = kOptimizerStatePrefix;
constexpr const char* kShardKind = "training_checkpoint_shard";
constexpr const char* kIndexFormat = "cudagrad.sharded_checkpoint";
constexpr const char* kPiecesKey = "cudagrad.pieces";  // {"name": [offset, [whole shape]], ...}

// ---- writing

// Elements [n*rank/W, n*(rank+1)/W) of a tensor every rank holds alike; nothing when that is empty.
void add_even_split(std::vector<StatePiece>& out, const std::string& name, const Tensor& t, int rank, int world) {
  if (t.dim() == 0) {
    if (rank == 0) out.push_back({name, {}, 0, t});
    return;
  }
  const int64_t n = t.numel(), begin = n * rank / world, end = n * (rank + 1) / world;
  if (end > begin) out.push_back({name, t.shape(), begin, t.view_at(begin, {end - begin})});
}

std::string crc_hex(uint32_t crc) { return fmt::format("{:08x}", crc); }

// ---- reading

struct Index {
  int64_t generation = 0, world_size = 0;
  std::vector<ShardFile> shards;
  std::map<std::string, std::string> metadata;
};

Index read_index(const fs::path& folder) {
  const fs::path path = folder / kShardIndexName;
  auto bad = [&](const std::string& why) {
    return Error(fmt::format("sharded checkpoint {}: {} {}", folder.string(), path.filename().string(), why));
  };
  const std::optional<std::string> text = read_whole_file(path);
  if (!text)
    throw bad("is missing or unreadable: not a complete sharded checkpoint (the index is written last, so a save "
              "that did not finish leaves none)");
  Index index;
  try {
    const json j = json::parse(*text);
    if (j.at("format").get<std::string>() != kIndexFormat) throw bad("is not a cudagrad shard index");
    index.generation = j.at("generation").get<int64_t>();
    index.world_size = j.at("world_size").get<int64_t>();
    for (const json& s : j.at("shards")) {
      ShardFile f;
      f.rank = s.at("rank").get<int>();
      f.file = s.at("file").get<std::string>();
      f.bytes = s.at("bytes").get<uint64_t>();
      f.crc = uint32_t(std::stoul(s.at("crc32").get<std::string>(), nullptr, 16));
      index.shards.push_back(std::move(f));
    }
    index.metadata = j.at("metadata").get<std::map<std::string, std::string>>();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw bad(fmt::format("is malformed ({})", e.what()));
  }
  if (index.world_size < 1 || int64_t(index.shards.size()) != index.world_size)
    throw bad(fmt::format("lists {} shard files for a world size of {}", index.shards.size(), index.world_size));
  for (size_t r = 0; r < index.shards.size(); ++r) {
    const ShardFile& s = index.shards[r];
    // A file name only: an index can never point outside its folder.
    if (s.rank != int(r) || s.file.empty() || s.file.find('/') != std::string::npos || s.file == "." || s.file == "..")
      throw bad(fmt::format("entry {} (rank {}, file '{}') is not rank {}'s file in this folder", r, s.rank, s.file, r));
  }
  return index;
}

// A piece as found in a shard file, before any tensor is allocated.
struct FoundPiece {
  const safetensors::TensorRecord* record;
  const std::string* file;
  int64_t offset, count;
};
// One tensor's pieces, and the shape and dtype they agree on.
struct Pieces {
  Shape shape;
  DType dtype = DType::f32;
  std::vector<FoundPiece> found;
};

constexpr int64_t kMaxElements = int64_t(1) << 40;

void add_piece(std::map<std::string, Pieces>& tensors, const fs::path& folder, const std::string& file,
               const std::string& name, const json& where, const safetensors::TensorRecord& r) {
  auto bad = [&](const std::string& why) {
    return Error(fmt::format("sharded checkpoint {}: tensor '{}' in {}: {}", folder.string(), name, file, why));
  };
  int64_t offset = 0;
  Shape shape;
  try {
    offset = where.at(0).get<int64_t>();
    shape = where.at(1).get<Shape>();
  } catch (const std::exception&) {
    throw bad("its place in the whole tensor is not recorded as [offset, [shape]]");
  }
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && numel > kMaxElements / d)) throw bad(fmt::format("whole shape {} is not a shape", shape_str(shape)));
    numel *= d;
  }
  const int64_t count = shape_numel(r.shape);  // safetensors::load checked it against the bytes
  if (r.shape.size() > 1 || (r.shape.empty() && !shape.empty()) || offset < 0 || offset > numel - count)
    throw bad(fmt::format("a piece of {} elements at {} does not lie inside its tensor of shape {}", count, offset,
                          shape_str(shape)));
  const DType dtype = dtype_from_safetensors_name(r.dtype);
  auto [it, fresh] = tensors.try_emplace(name);
  Pieces& t = it->second;
  if (fresh) {
    t.shape = shape;
    t.dtype = dtype;
  } else if (t.shape != shape || t.dtype != dtype) {
    throw bad(fmt::format("it is {}{} there but {}{} in {}", dtype_name(dtype), shape_str(shape), dtype_name(t.dtype),
                          shape_str(t.shape), *t.found.front().file));
  }
  t.found.push_back({&r, &file, offset, count});
}

// The tensor whole, once its pieces are shown to tile it exactly: sorted, they start at 0, meet end
// to end, and end at numel (so the allocation is no larger than the bytes the files hold).
Tensor assemble(const fs::path& folder, const std::string& name, Pieces& t, size_t files) {
  std::sort(t.found.begin(), t.found.end(), [](const FoundPiece& a, const FoundPiece& b) { return a.offset < b.offset; });
  int64_t at = 0;
  for (const FoundPiece& p : t.found) {
    if (p.offset != at)
      throw Error(fmt::format("sharded checkpoint {}: tensor '{}' {} at element {} (its {} shard files do not fit "
                              "together: files of different saves or world sizes?)",
                              folder.string(), name, p.offset > at ? "has a gap" : "has overlapping pieces", at, files));
    at += p.count;
  }
  if (at != shape_numel(t.shape))
    throw Error(fmt::format("sharded checkpoint {}: tensor '{}' has {} of its {} elements in the {} shard files",
                            folder.string(), name, at, shape_numel(t.shape), files));
  Tensor whole = Tensor::empty(t.shape, t.dtype);
  for (const FoundPiece& p : t.found)
    if (p.count > 0)
      std::memcpy(static_cast<char*>(whole.raw_data()) + p.offset * itemsize(t.dtype), p.record->bytes.data(),
                  p.record->bytes.size());
  return whole;
}

}  // namespace

std::vector<StatePiece> local_pieces(const Module& model, const Optimizer& optimizer, int rank, int world_size) {
  CG_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, "local_pieces: rank {} of {}", rank, world_size);
  std::vector<StatePiece> out;
  std::map<std::string, Shape> shape_of;
  for (const auto& [name, p] : model.named_parameters()) shape_of[name] = p.shape();
  // Parameters: the optimizer's slices (full_shard's parameters hold no memory between steps, so
  // never read them), else the even split.
  if (optimizer.sharded()) {
    for (const Optimizer::Slice& s : optimizer.slices()) out.push_back({s.name, shape_of.at(s.name), s.range.begin, s.param});
  } else {
    for (const auto& [name, p] : model.named_parameters()) add_even_split(out, name, p, rank, world_size);
  }
  for (const auto& [name, b] : model.named_buffers())
    if (rank == 0) out.push_back({name, b.shape(), 0, b.dim() == 0 ? b : b.view({b.numel()})});
  const std::string prefix = kOptimPrefix;
  for (const auto& [key, t] : optimizer.state_tensors()) {
    const std::string param = key.substr(key.find('.') + 1);
    if (!optimizer.sharded()) {
      add_even_split(out, prefix + key, t, rank, world_size);
      continue;
    }
    const Optimizer::Range r = optimizer.shard_ranges().at(param);
    if (t.dim() == 0) {
      if (r.begin == 0) out.push_back({prefix + key, {}, 0, t});  // one rank holds each parameter's first element
    } else {
      out.push_back({prefix + key, shape_of.at(param), r.begin, t});
    }
  }
  return out;
}

std::string shard_file_name(int rank, int64_t generation) {
  return fmt::format("rank{}-gen{}.safetensors", rank, generation);
}

int64_t next_generation(const fs::path& folder) {
  if (!fs::is_regular_file(folder / kShardIndexName)) return 1;
  try {
    return read_index(folder).generation + 1;
  } catch (const Error&) {
    return 1;  // a damaged index is replaced; its files' names do not matter
  }
}

ShardFile write_shard(const fs::path& folder, int rank, int world_size, int64_t generation,
                      const std::vector<StatePiece>& pieces) {
  safetensors::File file;
  json where = json::object();
  for (const StatePiece& p : pieces) {
    file.tensors.emplace_back(p.name, to_record(p.values));
    where[p.name] = json::array({p.offset, p.shape});
  }
  file.metadata["cudagrad.kind"] = kShardKind;
  file.metadata["cudagrad.shard.rank"] = std::to_string(rank);
  file.metadata["cudagrad.shard.world_size"] = std::to_string(world_size);
  file.metadata["cudagrad.shard.generation"] = std::to_string(generation);
  file.metadata[kPiecesKey] = where.dump();
  ShardFile entry;
  entry.rank = rank;
  entry.file = shard_file_name(rank, generation);
  const fs::path path = folder / entry.file;
  safetensors::save(path.string(), file);
  // The entry describes the bytes on disk, read back: what a loader will compare.
  const std::optional<std::string> written = read_whole_file(path);
  if (!written) throw Error(fmt::format("checkpoint shard {}: cannot be read back after writing it", path.string()));
  entry.bytes = written->size();
  entry.crc = crc32_of(*written);
  return entry;
}

void write_shard_index(const fs::path& folder, int64_t generation, const std::vector<ShardFile>& shards,
                       const std::map<std::string, std::string>& metadata) {
  json files = json::array();
  for (const ShardFile& s : shards)
    files.push_back({{"rank", s.rank}, {"file", s.file}, {"bytes", s.bytes}, {"crc32", crc_hex(s.crc)}});
  const json index = {{"format", kIndexFormat}, {"generation", generation}, {"world_size", shards.size()},
                      {"shards", files},        {"metadata", metadata}};
  write_file_atomically((folder / kShardIndexName).string(), index.dump(1) + "\n");
  // Only now are the previous generation's files unneeded (the names of shard_file_name).
  static const std::regex shard_name(R"(rank[0-9]+-gen([0-9]+)\.safetensors)");
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, m, shard_name) && m[1] != std::to_string(generation)) fs::remove(e.path(), ec);
  }
}

bool is_sharded_checkpoint(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::exists(path / kShardIndexName, ec);
}

std::vector<ShardFile> shard_index(const fs::path& folder) { return read_index(folder).shards; }

namespace {

// The index, once every file it names is there with its recorded size and CRC-32.
Index verified_index(const fs::path& folder) {
  Index index = read_index(folder);
  for (const ShardFile& s : index.shards) {
    const fs::path path = folder / s.file;
    auto bad = [&](const std::string& why) {
      return Error(fmt::format("sharded checkpoint {}: rank {}'s shard {} {}", folder.string(), s.rank, s.file, why));
    };
    const std::optional<std::string> bytes = read_whole_file(path);
    if (!bytes) throw bad("is missing or unreadable");
    if (bytes->size() != s.bytes)
      throw bad(fmt::format("has {} bytes where the index records {} ({})", bytes->size(), s.bytes,
                            bytes->size() < s.bytes ? "truncated" : "not the file the index was written for"));
    if (crc32_of(*bytes) != s.crc)
      throw bad(fmt::format("has CRC-32 {} where the index records {}: altered, or not the file the index was "
                            "written for", crc_hex(crc32_of(*bytes)), crc_hex(s.crc)));
  }
  return index;
}

}  // namespace

std::vector<ShardFile> verify_sharded_checkpoint(const fs::path& folder) { return verified_index(folder).shards; }

CheckpointContents read_sharded_checkpoint(const fs::path& folder) {
  const Index index = verified_index(folder);
  std::vector<safetensors::File> files;  // every shard in memory until the tensors are assembled
  files.reserve(index.shards.size());
  std::map<std::string, Pieces> tensors;
  for (const ShardFile& s : index.shards) {
    auto bad = [&](const std::string& why) {
      return Error(fmt::format("sharded checkpoint {}: rank {}'s file {} {}", folder.string(), s.rank, s.file, why));
    };
    const safetensors::File& file = files.emplace_back(safetensors::load((folder / s.file).string()));
    auto kind = file.metadata.find("cudagrad.kind");
    auto pieces = file.metadata.find(kPiecesKey);
    if (kind == file.metadata.end() || kind->second != kShardKind || pieces == file.metadata.end())
      throw bad("is not a cudagrad checkpoint shard");
    json where;
    try {
      where = json::parse(pieces->second);
    } catch (const std::exception& e) {
      throw bad(fmt::format("has a malformed {} ({})", kPiecesKey, e.what()));
    }
    for (const auto& [name, record] : file.tensors) {
      if (!where.is_object() || !where.contains(name)) throw bad(fmt::format("records no place for tensor '{}'", name));
      add_piece(tensors, folder, s.file, name, where[name], record);
    }
  }
  CheckpointContents c;
  c.metadata = index.metadata;
  for (auto& [name, t] : tensors) {
    Tensor whole = assemble(folder, name, t, index.shards.size());
    if (name.rfind(kOptimPrefix, 0) == 0) c.optimizer[name.substr(std::strlen(kOptimPrefix))] = std::move(whole);
    else c.model[name] = std::move(whole);
  }
  return c;
}

}  // namespace cg::nn
