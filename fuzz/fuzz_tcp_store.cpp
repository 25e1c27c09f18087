// The rendezvous store's request decoding, as the server runs it on bytes from a socket: the input
// is a stream of requests. Each is decoded (malformed ones must be refused before allocating what
// they ask for), then applied to a key-value map as the server would (set, get without waiting,
// add). Anything but a clean end or a refusal is a finding; so is a decoded request that does not
// re-encode to the bytes it came from.
#include <cstring>
#include <map>

#include "dist/tcp_store_protocol.h"

using namespace cg::dist::store_protocol;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t pos = 0;
  const ReadExact read = [&](void* dst, size_t n) {
    if (n > size - pos) {
      pos = size;
      return false;
    }
    std::memcpy(dst, data + pos, n);
    pos += n;
    return true;
  };
  std::map<std::string, std::vector<char>> store;
  while (true) {
    const size_t start = pos;
    Request req;
    std::string why;
    const ReadResult got = read_request(read, req, why);
    if (got == ReadResult::malformed && why.empty()) __builtin_trap();  // refusals must say why
    if (got != ReadResult::ok) break;
    const std::vector<char> again = encode_request(req.op, req.key, req.value);
    if (again.size() != pos - start || std::memcmp(again.data(), data + start, again.size()) != 0)
      __builtin_trap();
    if (req.op == kSet) {
      store[req.key] = req.value;
    } else if (req.op == kGet) {
      auto it = store.find(req.key);
      if (it != store.end() && it->second.size() > kMaxValueBytes) __builtin_trap();
    } else if (req.op == kAdd) {
      add_to_slot(store[req.key], req.number);
    } else if (req.op != kHello || !req.value.empty()) {
      __builtin_trap();  // read_request returns only the four operations, hello without a value
    }
  }
  return 0;
}
