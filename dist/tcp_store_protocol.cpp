#include "dist/tcp_store_protocol.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

namespace cg::dist::store_protocol {
namespace {

// Reads a u32 length and that many bytes, refusing lengths over `limit` before allocating.
ReadResult read_blob(const ReadExact& read, std::vector<char>& out, uint32_t limit, const char* what,
                     std::string& why) {
  uint32_t n = 0;
  if (!read(&n, 4)) return ReadResult::closed;
  if (n > limit) {
    why = fmt::format("{} of {} bytes (the limit is {})", what, n, limit);
    return ReadResult::malformed;
  }
  // Grown as bytes arrive, so a length field promising megabytes costs nothing until they come.
  constexpr size_t kChunk = 64 * 1024;
  out.clear();
  while (out.size() < n) {
    const size_t have = out.size(), take = std::min<size_t>(kChunk, n - have);
    out.resize(have + take);
    if (!read(out.data() + have, take)) return ReadResult::closed;
  }
  return ReadResult::ok;
}

// A hello's key is the job token; it carries no value.
ReadResult check_hello(const Request& hello, std::string& why) {
  if (hello.value.empty()) return ReadResult::ok;
  why = fmt::format("hello carries a {}-byte value", hello.value.size());
  return ReadResult::malformed;
}

}  // namespace

ReadResult read_request(const ReadExact& read, Request& out, std::string& why) {
  if (!read(&out.op, 1)) return ReadResult::closed;
  if (out.op != kSet && out.op != kGet && out.op != kAdd && out.op != kHello) {
    why = fmt::format("unknown operation {}", int(out.op));
    return ReadResult::malformed;
  }
  std::vector<char> key;
  if (ReadResult r = read_blob(read, key, kMaxKeyBytes, "a key", why); r != ReadResult::ok) return r;
  out.key.assign(key.begin(), key.end());
  if (ReadResult r = read_blob(read, out.value, kMaxValueBytes, "a value", why); r != ReadResult::ok) return r;
  out.number = 0;
  if (out.op == kSet) return ReadResult::ok;
  if (out.op == kHello) return check_hello(out, why);
  if (out.value.size() != 8) {
    why = fmt::format("{} of '{}' carries {} bytes, not an 8-byte integer", out.op == kGet ? "get" : "add",
                      out.key, out.value.size());
    return ReadResult::malformed;
  }
  std::memcpy(&out.number, out.value.data(), 8);
  if (out.op == kGet && (out.number < 0 || out.number > kMaxWaitMs)) {
    why = fmt::format("get of '{}' asks to wait {} ms", out.key, out.number);
    return ReadResult::malformed;
  }
  return ReadResult::ok;
}

std::vector<char> encode_request(uint8_t op, const std::string& key, const std::vector<char>& value) {
  std::vector<char> out;
  out.reserve(9 + key.size() + value.size());
  out.push_back(char(op));
  auto blob = [&out](const char* p, size_t n) {
    const uint32_t len = uint32_t(n);
    const char* l = reinterpret_cast<const char*>(&len);
    out.insert(out.end(), l, l + 4);
    out.insert(out.end(), p, p + n);
  };
  blob(key.data(), key.size());
  blob(value.data(), value.size());
  return out;
}

int64_t add_to_slot(std::vector<char>& slot, int64_t delta) {
  uint64_t now = 0;
  if (slot.size() == 8) std::memcpy(&now, slot.data(), 8);
  now += uint64_t(delta);  // unsigned: wraps, where int64_t addition would be undefined
  slot.resize(8);
  std::memcpy(slot.data(), &now, 8);
  int64_t result;
  std::memcpy(&result, &now, 8);
  return result;
}

}  // namespace cg::dist::store_protocol
