// safetensors reading and writing. Rule: load() checks every size and offset against the file
// before allocating or copying anything, so bad input becomes a cg::Error, never a crash or a
// huge allocation; save() writes through util/atomic_file so a crash never leaves half a file.
#include "util/safetensors.h"

#include <fmt/ranges.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>

#include "util/atomic_file.h"
#include "util/check.h"
#include "util/dtype.h"

namespace cg::safetensors {
namespace {

// ordered_json keeps the header's key order, so tensors of zero bytes (which share an offset
// with a neighbour) come back in the order they were written.
using Json = nlohmann::ordered_json;
constexpr const char* kMetadataEntry = "__metadata__";
constexpr const char* kFormatVersion = "1";

std::optional<DType> dtype_of_name(const std::string& name) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i64, DType::i32, DType::u8})
    if (dtype_safetensors_name(t) == name) return t;
  return std::nullopt;
}

// product(shape) * itemsize, or nullopt when a dimension is negative or the count overflows.
std::optional<uint64_t> byte_size(DType t, const std::vector<int64_t>& shape) {
  uint64_t bytes = itemsize(t);
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(bytes, uint64_t(d), &bytes)) return std::nullopt;
  return bytes;
}

// The JSON header for `tensors` (offsets assigned in order, back to back) and `metadata`.
// Throws nlohmann's type_error when a string is not valid UTF-8.
std::string render_header(const std::vector<std::pair<std::string, TensorRecord>>& tensors,
                          const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  uint64_t offset = 0;
  for (const auto& [name, r] : tensors) {
    header[name] = {{"dtype", r.dtype}, {"shape", r.shape}, {"data_offsets", {offset, offset + r.bytes.size()}}};
    offset += r.bytes.size();
  }
  if (!metadata.empty()) header[kMetadataEntry] = metadata;
  return header.dump(-1, ' ', false, Json::error_handler_t::strict);
}

// CRC-32 of the canonical header followed by the data section (the tensors in order).
std::string checksum_of(const std::string& canonical_header,
                        const std::vector<std::pair<std::string, TensorRecord>>& tensors) {
  uLong crc = crc32_z(0L, Z_NULL, 0);
  crc = crc32_z(crc, reinterpret_cast<const Bytef*>(canonical_header.data()), canonical_header.size());
  for (const auto& [name, r] : tensors)  // (a null buffer would reset the CRC: skip empty ones)
    if (!r.bytes.empty()) crc = crc32_z(crc, r.bytes.data(), r.bytes.size());
  return fmt::format("{:08x}", uint32_t(crc));
}

// Reads a file front to back, turning short reads into errors that name the file.
class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path), file_(std::fopen(path.c_str(), "rb"), &std::fclose) {
    if (!file_) throw Error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
    std::error_code ec;
    size_ = std::filesystem::file_size(path, ec);
    if (ec) throw Error(fmt::format("cannot read {}: {}", path, ec.message()));
  }
  uint64_t size() const { return size_; }
  void read(void* into, size_t n, std::string_view what) {
    if (n != 0 && std::fread(into, 1, n, file_.get()) != n)
      throw Error(fmt::format("cannot load {}: reading {} failed ({})", path_, what,
                              std::ferror(file_.get()) ? std::strerror(errno) : "file shorter than expected"));
  }

 private:
  std::string path_;
  std::unique_ptr<std::FILE, decltype(&std::fclose)> file_;
  uint64_t size_ = 0;
};

// One tensor's header entry, checked against the data section's size.
struct Entry {
  std::string name;
  TensorRecord record;  // bytes not read yet
  uint64_t begin = 0, end = 0;
};

uint64_t count_field(const Json& v, const std::string& tensor, const char* field) {
  if (!v.is_number_unsigned() || v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    throw std::invalid_argument(fmt::format("tensor '{}': {} holds {}, not a count", tensor, field, v.dump()));
  return v.get<uint64_t>();
}

Entry parse_entry(const std::string& name, const Json& j, uint64_t data_size) {
  auto bad = [&](const std::string& why) { return std::invalid_argument(fmt::format("tensor '{}': {}", name, why)); };
  if (!j.is_object()) throw bad("entry is not a JSON object");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!j.contains(key)) throw bad(fmt::format("entry has no \"{}\"", key));
  const Json &dtype = j["dtype"], &shape = j["shape"], &offsets = j["data_offsets"];
  if (!dtype.is_string()) throw bad("dtype is not a string");
  if (!shape.is_array()) throw bad("shape is not an array");
  if (!offsets.is_array() || offsets.size() != 2) throw bad("data_offsets is not a [begin, end] pair");

  Entry e;
  e.name = name;
  e.record.dtype = dtype.get<std::string>();
  for (const Json& d : shape) e.record.shape.push_back(int64_t(count_field(d, name, "shape")));
  e.begin = count_field(offsets[0], name, "data_offsets");
  e.end = count_field(offsets[1], name, "data_offsets");
  const std::optional<DType> t = dtype_of_name(e.record.dtype);
  if (!t) throw bad(fmt::format("unsupported dtype '{}' (cudagrad reads {})", e.record.dtype, kSupportedDtypes));
  if (e.begin > e.end) throw bad(fmt::format("data_offsets [{}, {}] run backwards", e.begin, e.end));
  if (e.end > data_size)
    throw bad(fmt::format("data_offsets [{}, {}] lie outside the {}-byte data section (file truncated?)", e.begin,
                          e.end, data_size));
  const std::optional<uint64_t> need = byte_size(*t, e.record.shape);
  if (!need || *need != e.end - e.begin)
    throw bad(fmt::format("spans {} bytes, but dtype {} and shape {} need {}", e.end - e.begin, e.record.dtype,
                          shape.dump(), need ? std::to_string(*need) : std::string("more than 2^64")));
  return e;
}

}  // namespace

const TensorRecord* File::find(const std::string& name) const {
  for (const auto& [n, r] : tensors)
    if (n == name) return &r;
  return nullptr;
}

void save(const std::string& path, const File& file) {
  std::set<std::string> names;
  for (const auto& [name, r] : file.tensors) {
    if (name == kMetadataEntry) throw Error(fmt::format("cannot save {}: '{}' is reserved", path, name));
    if (!names.insert(name).second) throw Error(fmt::format("cannot save {}: duplicate tensor name '{}'", path, name));
    const std::optional<DType> t = dtype_of_name(r.dtype);
    if (!t)
      throw Error(fmt::format("cannot save {}: tensor '{}' has unsupported dtype '{}' (supported: {})", path, name,
                              r.dtype, kSupportedDtypes));
    const std::optional<uint64_t> need = byte_size(*t, r.shape);
    if (!need || *need != r.bytes.size())
      throw Error(fmt::format("cannot save {}: tensor '{}' has {} bytes, but dtype {} and shape [{}] need {}", path,
                              name, r.bytes.size(), r.dtype, fmt::join(r.shape, ", "),
                              need ? std::to_string(*need) : std::string("more than 2^64")));
  }
  std::map<std::string, std::string> metadata = file.metadata;
  metadata.erase(kChecksumKey);
  metadata.insert_or_assign(kFormatKey, std::string(kFormatVersion));
  std::string header;
  try {
    metadata[kChecksumKey] = checksum_of(render_header(file.tensors, metadata), file.tensors);
    header = render_header(file.tensors, metadata);
  } catch (const Json::exception& e) {
    throw Error(fmt::format("cannot save {}: a tensor name or metadata string is not valid UTF-8 ({})", path, e.what()));
  }
  header.resize((header.size() + 7) / 8 * 8, ' ');  // the format recommends 8-byte alignment of the data

  char length[8];
  for (int i = 0; i < 8; ++i) length[i] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  std::vector<std::string_view> pieces{std::string_view(length, 8), header};
  for (const auto& [name, r] : file.tensors)
    pieces.emplace_back(reinterpret_cast<const char*>(r.bytes.data()), r.bytes.size());
  write_file_atomically(path, pieces);
}

namespace {

// The tensors must tile the data section exactly, as the format requires: sorted by offset,
// each starts where the previous ended (stable: zero-byte tensors keep their header order).
template <typename Invalid>
void check_tiling(std::vector<Entry>& entries, uint64_t data_size, const Invalid& invalid) {
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t position = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < position)
      throw invalid(fmt::format("tensors '{}' and '{}' overlap in the data section", previous->name, e.name));
    if (e.begin > position)
      throw invalid(fmt::format("{} unused bytes before tensor '{}' in the data section", e.begin - position, e.name));
    position = e.end;
    if (e.end > e.begin) previous = &e;
  }
  if (position != data_size)
    throw invalid(fmt::format("{} bytes after the last tensor in the data section", data_size - position));
}

// A file that declares the cudagrad format must carry its checksum: otherwise damage to the
// checksum's key would silently turn verification off. Files from other tools have neither.
void verify_checksum(const std::string& path, const File& file) {
  const auto stored = file.metadata.find(kChecksumKey);
  if (stored == file.metadata.end() && file.metadata.count(kFormatKey))
    throw Error(fmt::format("checkpoint {} is corrupt: it declares {} but has no {} (damaged header?)", path,
                            kFormatKey, kChecksumKey));
  if (stored != file.metadata.end()) {
    std::map<std::string, std::string> rest = file.metadata;
    rest.erase(kChecksumKey);
    const std::string actual = checksum_of(render_header(file.tensors, rest), file.tensors);
    if (actual != stored->second)
      throw Error(fmt::format("checkpoint {} is corrupt: checksum mismatch (stored {}, computed {}); the file was "
                              "damaged after it was written", path, stored->second, actual));
  }
}

}  // namespace

File load(const std::string& path) {
  auto invalid = [&](const std::string& why) { return Error(fmt::format("cannot load {}: {}", path, why)); };
  Reader in(path);
  if (in.size() < 8)
    throw invalid(fmt::format("{} bytes is too short for a safetensors file (8-byte header length first)", in.size()));
  uint8_t length[8];
  in.read(length, 8, "the header length");
  uint64_t header_size = 0;
  for (int i = 0; i < 8; ++i) header_size |= uint64_t(length[i]) << (8 * i);
  if (header_size > in.size() - 8)
    throw invalid(fmt::format("the header length {} exceeds the {} bytes that follow it (file truncated, or not "
                              "a safetensors file?)", header_size, in.size() - 8));
  const uint64_t data_size = in.size() - 8 - header_size;
  std::string header_text(header_size, '\0');
  in.read(header_text.data(), header_text.size(), "the header");

  Json header;
  try {
    header = Json::parse(header_text);
  } catch (const Json::exception& e) {
    throw invalid(fmt::format("the header is not valid JSON ({})", e.what()));
  }
  if (!header.is_object()) throw invalid("the header is not a JSON object");

  File file;
  std::vector<Entry> entries;
  try {
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() != kMetadataEntry) {
        entries.push_back(parse_entry(it.key(), it.value(), data_size));
        continue;
      }
      if (!it->is_object()) throw std::invalid_argument("__metadata__ is not a JSON object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) throw std::invalid_argument(fmt::format("metadata '{}' is not a string", m.key()));
        file.metadata[m.key()] = m->get<std::string>();
      }
    }
  } catch (const std::invalid_argument& e) {
    throw invalid(e.what());
  }

  check_tiling(entries, data_size, invalid);

  // Sizes are now known to add up to the file's size, so these reads and allocations are bounded.
  for (Entry& e : entries) {
    e.record.bytes.resize(e.end - e.begin);
    in.read(e.record.bytes.data(), e.record.bytes.size(), fmt::format("tensor '{}'", e.name));
    file.tensors.emplace_back(std::move(e.name), std::move(e.record));
  }

  verify_checksum(path, file);
  return file;
}

}  // namespace cg::safetensors
