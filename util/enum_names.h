// The names of an enum's values as configs, logs and messages write them. Rule: one table per
// enum, the function `enum_names(E)` declared next to the enum (found by argument-dependent
// lookup), listing every value in the order help shows them. The config schema reads an enum
// field through it (train/train_config.cpp), so a library enum needs no mirror in the config.
#pragma once
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "util/check.h"

namespace cg {

template <typename E>
using EnumNames = std::vector<std::pair<E, const char*>>;

template <typename E>
const char* enum_name(E value) {
  for (const auto& [e, name] : enum_names(E{}))
    if (e == value) return name;
  CG_FAIL("enum value {} has no name in its table", int(value));
}

template <typename E>
std::optional<E> enum_from_name(std::string_view name) {
  for (const auto& [e, n] : enum_names(E{}))
    if (name == n) return e;
  return std::nullopt;
}

}  // namespace cg
