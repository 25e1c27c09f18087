#include "train/distributed.h"

#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>

#include "dist/advertised_address.h"
#include "dist/backend_choice.h"
#include "engine/runtime.h"
#include "util/check.h"
#include "util/log.h"

namespace cg::train {
namespace {

// The dotted key of the first line where two resolved configs (to_yaml output) differ.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb, group;
  while (true) {
    const bool ga = bool(std::getline(sa, la)), gb = bool(std::getline(sb, lb));
    if (!ga && !gb) return "";
    if (!la.empty() && la[0] != ' ') group = la.substr(0, la.find(':'));
    if (la != lb || ga != gb) {
      const std::string line = ga ? la : lb;
      const size_t start = line.find_first_not_of(' ');
      const std::string key = line.substr(start, line.find(':') - start);
      return line[0] == ' ' ? group + "." + key : key;
    }
  }
}

// The running executable's CRC-32 and size: ranks of one job must run the same build (another
// build may lay out its messages or compute differently, and then fails in obscure ways).
std::string executable_fingerprint() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  if (!in) return "unknown";  // no /proc: skip the check rather than fail
  uLong crc = crc32(0L, Z_NULL, 0);
  int64_t size = 0;
  std::vector<char> chunk(1 << 20);
  while (in.read(chunk.data(), std::streamsize(chunk.size())) || in.gcount() > 0) {
    crc = crc32(crc, reinterpret_cast<const Bytef*>(chunk.data()), uInt(in.gcount()));
    size += in.gcount();
  }
  return fmt::format("crc32 {:08x}, {} bytes", crc, size);
}

}  // namespace

DistContext::DistContext(double timeout_s) : id_(dist::identity_from_env()), timeout_s_(timeout_s) {
  log::set_rank(id_.rank, id_.world_size);
  if (!distributed()) return;
  const auto timeout = std::chrono::milliseconds(int64_t(timeout_s * 1000));
  dist::TcpStoreOptions so;
  so.host = id_.master_addr;
  so.port = id_.master_port;
  so.is_server = id_.rank == 0;
  so.timeout = timeout;
  so.expected_clients = id_.world_size;
  if (const char* token = std::getenv("CUDAGRAD_JOB_TOKEN")) so.job_token = token;  // cudagrad-launch's
  store_ = std::make_unique<dist::TcpStore>(so);
  dist::ProcessGroupOptions po;
  po.timeout = timeout;
  address_ = dist::address_to_advertise(store_->local_address());
  group_ = std::make_unique<dist::ProcessGroup>(*store_, id_.rank, id_.world_size, address_, po);
  log::info("distributed: {} ranks ({}), rendezvous at {}:{}, this rank's address {}", id_.world_size, id_.source,
            id_.master_addr, id_.master_port, address_);
}

dist::JobShape DistContext::job_shape(Device device) const {
  dist::JobShape job;
  job.cuda_tensors = device.is_cuda();
  job.world_size = world_size();
  job.local_world_size = id_.local_world_size;
  job.visible_gpus = device.is_cuda() ? runtime::device_count() : 0;
  return job;
}

std::unique_ptr<dist::GradientComm> DistContext::make_gradient_comm(const TrainConfig::Dist& d, Device device) {
  const dist::TransportChoice choice = dist::choose_transport(d.backend, job_shape(device));
  switch (choice.transport) {
    case dist::Transport::none: return nullptr;
    case dist::Transport::modeled: {
      const dist::Link link = d.modeled_link == ModeledLink::nvlink ? dist::nvlink_link() : dist::infiniband_link();
      auto comm = dist::make_modeled_comm(int(d.modeled_world_size), link, device);
      log::info("communication: {}", comm->name());
      return comm;
    }
    case dist::Transport::host_gloo: return dist::make_host_gloo_comm(*group_);
    case dist::Transport::nccl: {
      auto comm = dist::make_nccl_comm(*store_, rank(), world_size(), device, timeout_s_);
      log::info("communication: {} ({})", comm->name(), choice.why);
      return comm;
    }
    case dist::Transport::staged_gloo:
      log::info("communication: {}", choice.why);
      return dist::make_staged_gloo_comm(*group_, device);
  }
  CG_FAIL("unknown transport");
}

DistContext::HybridComms DistContext::hybrid_comms(const TrainConfig::Dist& d, Device device) {
  CG_CHECK(subgroups_.empty() && subgroup_comms_.empty(), "DistContext: hybrid_comms is called once");
  // Each subgroup's transport, chosen as the job's is.
  const dist::Transport transport = dist::choose_transport(d.backend, job_shape(device)).transport;
  if (transport == dist::Transport::modeled) return modeled_hybrid_comms(d, device);
  const dist::HybridPlace place = dist::hybrid_place(rank(), world_size(), id_.local_rank, id_.local_world_size);
  if (!place.why_not.empty()) throw UsageError(place.why_not);
  auto subgroup = [&](const std::string& prefix, int rank, int size) -> dist::GradientComm* {
    if (size < 2) return nullptr;
    if (transport == dist::Transport::nccl) {
      subgroup_comms_.push_back(dist::make_nccl_comm(*store_, rank, size, device, timeout_s_, prefix));
      return subgroup_comms_.back().get();
    }
    dist::ProcessGroupOptions po;
    po.timeout = std::chrono::milliseconds(int64_t(timeout_s_ * 1000));
    po.key_prefix = prefix;
    subgroups_.push_back(std::make_unique<dist::ProcessGroup>(*store_, rank, size, address_, po));
    subgroup_comms_.push_back(transport == dist::Transport::staged_gloo
                                  ? dist::make_staged_gloo_comm(*subgroups_.back(), device)
                                  : dist::make_host_gloo_comm(*subgroups_.back()));
    return subgroup_comms_.back().get();
  };
  HybridComms comms;
  comms.node = subgroup(fmt::format("hybrid/node{}/", place.node), place.local, place.local_world);
  comms.replicas = subgroup(fmt::format("hybrid/shard{}/", place.local), place.node, place.nodes);
  log::info("dist.sharding=hybrid_shard: {} nodes of {} ranks; this rank holds shard {} on node {}", place.nodes,
            place.local_world, place.local, place.node);
  return comms;
}

// The one real rank holds every unit whole, so the cross-node ring is timed for a node rank's
// shard of it: 1/kNvlinkNodeGpus of the bytes (the config checked the world is whole nodes).
DistContext::HybridComms DistContext::modeled_hybrid_comms(const TrainConfig::Dist& d, Device device) {
  const int per_node = dist::kNvlinkNodeGpus, nodes = int(d.modeled_world_size) / per_node;
  subgroup_comms_.push_back(dist::make_modeled_comm(per_node, dist::nvlink_link(), device));
  subgroup_comms_.push_back(dist::make_modeled_comm(nodes, dist::infiniband_link(), device, 1.0 / per_node));
  log::info("dist.sharding=hybrid_shard on the modeled ring: {} nodes of {} GPUs ({} inside, {} across)", nodes,
            per_node, subgroup_comms_[0]->name(), subgroup_comms_[1]->name());
  return {subgroup_comms_[0].get(), subgroup_comms_[1].get()};
}

DistContext::~DistContext() {
  if (!distributed()) return;
  // Rank 0 hosts the store: on a normal exit nobody may still need it when it goes. When an
  // error is unwinding, peers may be dead: leave at once rather than wait out the timeout.
  if (std::uncaught_exceptions() == 0) {
    try {
      barrier();
    } catch (const std::exception&) {
    }
  }
  subgroup_comms_.clear();
  subgroups_.clear();
  group_.reset();
  store_.reset();
}

void DistContext::check_same_config(const std::string& config_yaml) {
  if (!distributed()) return;
  const std::string binary = executable_fingerprint();
  store_->set("binary/" + std::to_string(rank()), binary);
  const std::string reference_binary = store_->get_string("binary/0");
  if (binary != reference_binary && binary != "unknown" && reference_binary != "unknown")
    throw UsageError(fmt::format("rank {} runs a different build of the program than rank 0 ({} vs {}): start "
                                 "every rank with the same binary", rank(), binary, reference_binary));
  store_->set("config/" + std::to_string(rank()), config_yaml);
  const std::string reference = store_->get_string("config/0");
  const std::string key = first_difference(reference, config_yaml);
  if (!key.empty())
    throw UsageError(fmt::format("rank {} runs a different config than rank 0: key '{}' differs", rank(), key));
}

void DistContext::all_reduce_sum(std::vector<double>& values) {
  if (distributed()) group_->all_reduce(values.data(), int64_t(values.size()));
}

bool DistContext::any_rank(bool flag) {
  std::vector<double> v{flag ? 1.0 : 0.0};
  all_reduce_sum(v);
  return v[0] > 0;
}

void DistContext::check_replicas_equal(uint32_t fingerprint, const char* what) {
  if (!distributed()) return;
  std::vector<uint32_t> all(static_cast<size_t>(world_size()));
  group_->all_gather(&fingerprint, all.data(), sizeof(uint32_t));
  for (int r = 1; r < world_size(); ++r)
    if (all[size_t(r)] != all[0])
      throw Error(fmt::format("replicas diverged: rank {}'s {} differ from rank 0's (fingerprint {:08x} vs "
                              "{:08x})", r, what, all[size_t(r)], all[0]));
  log::info("distributed: all {} replicas hold identical {} (fingerprint {:08x})", world_size(), what, all[0]);
}

void DistContext::broadcast_from_rank0(std::string& bytes) {
  if (!distributed()) return;
  uint64_t size = bytes.size();
  group_->broadcast(&size, sizeof(size), 0);
  bytes.resize(size);
  constexpr uint64_t kPiece = uint64_t(64) << 20;  // bounded messages, whatever the checkpoint's size
  for (uint64_t at = 0; at < size; at += kPiece)
    group_->broadcast(bytes.data() + at, size_t(std::min(kPiece, size - at)), 0);
}

void DistContext::barrier() {
  if (distributed()) group_->barrier();
}

}  // namespace cg::train
