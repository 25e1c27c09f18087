// Reading the files the golden scripts write (tests/golden/*.py): tensors by name, and the
// metadata in which each script records how it ran (model shape, optimizer, batch sizes), so that
// a test replaying the run reads those settings instead of repeating them. A missing name throws.
#pragma once
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "util/safetensors.h"

namespace cg::test {

inline Tensor golden_tensor(const safetensors::File& f, const std::string& name) {
  const safetensors::TensorRecord* r = f.find(name);
  if (!r) throw Error("golden file lacks " + name);
  Tensor t = Tensor::empty(r->shape, dtype_from_safetensors_name(r->dtype));
  std::memcpy(t.raw_data(), r->bytes.data(), t.nbytes());
  return t;
}

inline const std::string& golden_meta_text(const safetensors::File& f, const std::string& key) {
  auto it = f.metadata.find(key);
  if (it == f.metadata.end()) throw Error("golden file lacks metadata " + key);
  return it->second;
}

inline double golden_meta(const safetensors::File& f, const std::string& key) {
  return std::stod(golden_meta_text(f, key));
}

inline bool golden_meta_flag(const safetensors::File& f, const std::string& key) {
  const std::string& v = golden_meta_text(f, key);
  if (v != "true" && v != "false") throw Error("metadata " + key + " is not a flag: " + v);
  return v == "true";
}

// "8,16,32" -> {8, 16, 32}
inline std::vector<int64_t> golden_meta_list(const safetensors::File& f, const std::string& key) {
  std::vector<int64_t> out;
  std::stringstream in(golden_meta_text(f, key));
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoll(item));
  return out;
}

}  // namespace cg::test
