// The rendezvous store's wire format, apart from the sockets so that it can be tested (and
// fuzzed) from a buffer. A request is: op (1 byte), key (u32 length + bytes), value (u32 length +
// bytes), lengths in host byte order (all ranks of a job run the same build). For get, the value
// is the wait in milliseconds as an int64; for add, the delta as an int64; for hello (a client's
// first request when its job has a token), the key is the job token. Replies: set -> status byte;
// get -> status byte + blob; add -> the new int64; hello -> status byte (kOk, or kWrongJob).
// Rule: a request that breaks the format (unknown op, a blob larger than the limits, a get or add
// whose value is not 8 bytes, a negative or absurd wait) is "malformed": the server drops that
// connection instead of allocating what it asks for or waiting forever.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace cg::dist::store_protocol {

enum Op : uint8_t { kSet = 0, kGet = 1, kAdd = 2, kHello = 3 };
enum Status : uint8_t { kOk = 0, kTimeout = 1, kWrongJob = 2 };

// Keys are short names ("barrier/init/0"); values are transport addresses and resolved configs
// (kilobytes). The limits are far above both and far below what would hurt the server.
inline constexpr uint32_t kMaxKeyBytes = 4096;
inline constexpr uint32_t kMaxValueBytes = 64u << 20;
inline constexpr int64_t kMaxWaitMs = int64_t(7) * 24 * 3600 * 1000;  // a week
// Keys held at once: a rendezvous of N ranks writes a few per rank (addresses, configs, barrier
// counters), so a million is far above any job; past it a client is dropped instead of growing the
// map until rank 0 runs out of memory.
inline constexpr size_t kMaxKeys = size_t(1) << 20;

struct Request {
  uint8_t op = kSet;
  std::string key;
  std::vector<char> value;  // kSet: the bytes to store
  int64_t number = 0;       // kGet: the wait in ms; kAdd: the delta
};

// Reads exactly n bytes into dst; false when the stream ended or failed.
using ReadExact = std::function<bool(void* dst, size_t n)>;

enum class ReadResult { ok, closed, malformed };

// Reads one request. `closed`: the stream ended (cleanly or mid-request); `malformed`: the bytes
// break the format, and `why` says how.
ReadResult read_request(const ReadExact& read, Request& out, std::string& why);

// The request as bytes, as the client sends it.
std::vector<char> encode_request(uint8_t op, const std::string& key, const std::vector<char>& value);

// add's arithmetic on a stored slot: the slot holds an int64 (absent or any other size counts as
// 0); returns the new value, stored back. Wraps around on overflow (two's complement) rather than
// overflowing a signed integer.
int64_t add_to_slot(std::vector<char>& slot, int64_t delta);

}  // namespace cg::dist::store_protocol
