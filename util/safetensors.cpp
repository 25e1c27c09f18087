#include "util/safetensors.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "util/atomic_file.h"
#include "util/check.h"
#include "util/dtype.h"

namespace cg::safetensors {
namespace {

using nlohmann::json;
constexpr const char* kChecksumKey = "cudagrad.checksum";

int64_t expected_bytes(const std::string& name, const TensorRecord& r) {
  const DType t = dtype_from_safetensors_name(r.dtype);
  int64_t n = 1;
  for (int64_t d : r.shape) {
    if (d < 0) throw Error(fmt::format("tensor '{}' has a negative dimension", name));
    n *= d;
  }
  return n * int64_t(itemsize(t));
}

uint32_t crc_of(const std::string& header, const std::string& data) {
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(header.data()), uInt(header.size()));
  // zlib takes uInt lengths: feed large data sections in pieces.
  for (size_t off = 0; off < data.size(); off += (1u << 30)) {
    const size_t len = std::min<size_t>(data.size() - off, 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data() + off), uInt(len));
  }
  return uint32_t(crc);
}

// The header JSON for `file` plus, when given, the checksum entry; padded to 8 bytes.
std::string header_json(const File& file, const std::string* checksum) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, r] : file.tensors) {
    header[name] = {{"dtype", r.dtype}, {"shape", r.shape}, {"data_offsets", {offset, offset + r.bytes.size()}}};
    offset += r.bytes.size();
  }
  json meta = json::object();
  for (const auto& [k, v] : file.metadata)
    if (k != kChecksumKey) meta[k] = v;
  if (checksum) meta[kChecksumKey] = *checksum;
  if (!meta.empty()) header["__metadata__"] = meta;
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  return text;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw Error(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  return data;
}

}  // namespace

const TensorRecord* File::find(const std::string& name) const {
  for (const auto& [n, r] : tensors)
    if (n == name) return &r;
  return nullptr;
}

void save(const std::string& path, const File& file) {
  std::string data;
  std::set<std::string> names;
  for (const auto& [name, r] : file.tensors) {
    if (!names.insert(name).second) throw Error(fmt::format("{}: duplicate tensor name '{}'", path, name));
    if (int64_t(r.bytes.size()) != expected_bytes(name, r))
      throw Error(fmt::format("{}: tensor '{}' has {} bytes, its dtype and shape need {}", path, name,
                              r.bytes.size(), expected_bytes(name, r)));
    data.append(reinterpret_cast<const char*>(r.bytes.data()), r.bytes.size());
  }
  const std::string checksum = fmt::format("{:08x}", crc_of(header_json(file, nullptr), data));
  const std::string header = header_json(file, &checksum);
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xff);
  out += header;
  out += data;
  write_file_atomically(path, out);
}

File load(const std::string& path) {
  const std::string raw = read_all(path);
  auto corrupt = [&](const std::string& why) {
    return Error(fmt::format("checkpoint {} is corrupt or not a safetensors file: {}", path, why));
  };
  if (raw.size() < 8) throw corrupt(fmt::format("{} bytes, shorter than the 8-byte header length", raw.size()));
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= uint64_t(uint8_t(raw[size_t(i)])) << (8 * i);
  if (header_len > raw.size() - 8)
    throw corrupt(fmt::format("header of {} bytes but only {} follow (truncated?)", header_len, raw.size() - 8));
  json header;
  try {
    header = json::parse(raw.substr(8, header_len));
  } catch (const json::exception& e) {
    throw corrupt(std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) throw corrupt("header is not a JSON object");
  const std::string data = raw.substr(8 + header_len);

  File file;
  struct Range {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Range> ranges;
  try {
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") {
        for (auto m = it->begin(); m != it->end(); ++m) file.metadata[m.key()] = m->get<std::string>();
        continue;
      }
      TensorRecord r;
      r.dtype = it->at("dtype").get<std::string>();
      r.shape = it->at("shape").get<std::vector<int64_t>>();
      const auto offsets = it->at("data_offsets").get<std::vector<uint64_t>>();
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data.size())
        throw corrupt(fmt::format("tensor '{}' lies outside the {} data bytes (truncated?)", it.key(), data.size()));
      int64_t need;
      try {
        need = expected_bytes(it.key(), r);
      } catch (const Error& e) {
        throw corrupt(e.what());
      }
      if (uint64_t(need) != offsets[1] - offsets[0])
        throw corrupt(fmt::format("tensor '{}' spans {} bytes, its dtype and shape need {}", it.key(),
                                  offsets[1] - offsets[0], need));
      r.bytes.assign(data.begin() + std::ptrdiff_t(offsets[0]), data.begin() + std::ptrdiff_t(offsets[1]));
      ranges.push_back({offsets[0], offsets[1], it.key()});
      file.tensors.emplace_back(it.key(), std::move(r));
    }
  } catch (const json::exception& e) {
    throw corrupt(std::string("malformed header entry: ") + e.what());
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].begin < ranges[i - 1].end)
      throw corrupt(fmt::format("tensors '{}' and '{}' overlap", ranges[i - 1].name, ranges[i].name));
  // Keep the writer's order: the data order, which is the order tensors were saved in.
  std::sort(file.tensors.begin(), file.tensors.end(), [&](const auto& a, const auto& b) {
    const auto pa = header[a.first]["data_offsets"][0].template get<uint64_t>();
    const auto pb = header[b.first]["data_offsets"][0].template get<uint64_t>();
    return pa < pb;
  });

  auto stored = file.metadata.find(kChecksumKey);
  if (stored != file.metadata.end()) {
    const std::string actual = fmt::format("{:08x}", crc_of(header_json(file, nullptr), data));
    if (actual != stored->second)
      throw Error(fmt::format("checkpoint {} is corrupt: checksum mismatch (stored {}, computed {})",
                              path, stored->second, actual));
  }
  return file;
}

}  // namespace cg::safetensors
