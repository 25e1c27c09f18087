// The trainer's view of data parallelism: who this process is, and the few collective steps the
// training loop needs (sum metrics over ranks, agree on stopping, barriers, the start-up config
// check). In a single process every call is a cheap no-op, so the loop has one code path.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "train/train_config.h"
#include "dist/backend_choice.h"
#include "dist/gradient_comm.h"
#include "dist/identity.h"
#include "dist/process_group.h"
#include "dist/tcp_store.h"

namespace cg::train {

class DistContext {
 public:
  // Reads the identity from the environment; with more than one rank, joins the rendezvous and
  // connects the process group (timeout: how long any wait may take before it is an error).
  DistContext(double timeout_s);
  ~DistContext();

  const dist::Identity& identity() const { return id_; }
  int rank() const { return id_.rank; }
  int world_size() const { return id_.world_size; }
  bool distributed() const { return id_.world_size > 1; }
  dist::ProcessGroup* group() { return group_.get(); }
  // The transport for DDP's gradients on `device` as dist.backend says, by the rules of
  // dist/backend_choice.h; null when there is nothing to communicate (one process, not modeled).
  // auto: NCCL when every rank on this node has a GPU of its own, else Gloo (staged through pinned
  // memory for CUDA), said once in the log.
  std::unique_ptr<dist::GradientComm> make_gradient_comm(const TrainConfig::Dist& d, Device device);
  // dist.sharding=hybrid_shard: the transports of this rank's node (its ranks shard the
  // parameters) and of its replicas (the same local rank on every node; null with one node), of
  // the kind make_gradient_comm picks, over process groups of their own that this object keeps.
  // Collective: every rank calls it once. Refused, saying why, when the ranks are not laid out
  // node by node with several on each (dist::hybrid_place). With dist.backend=modeled, the one
  // process's two modeled rings: nodes of dist::kNvlinkNodeGpus on NVLink, the shards across the
  // nodes on InfiniBand.
  struct HybridComms {
    dist::GradientComm* node = nullptr;
    dist::GradientComm* replicas = nullptr;
  };
  HybridComms hybrid_comms(const TrainConfig::Dist& d, Device device);

  // Every rank must run the same resolved config: a difference fails naming the first differing
  // key, on the rank that differs from rank 0.
  void check_same_config(const std::string& config_yaml);
  void all_reduce_sum(std::vector<double>& values);
  bool any_rank(bool flag);  // true on every rank when it is true on at least one
  // Fails on every rank when the replicas' `fingerprint`s (of their weights) differ; `what` names
  // what was fingerprinted ("weights").
  void check_replicas_equal(uint32_t fingerprint, const char* what = "weights");
  // Rank 0's `bytes` on every rank (any size: sent in pieces).
  void broadcast_from_rank0(std::string& bytes);
  void barrier();

 private:
  dist::JobShape job_shape(Device device) const;  // what the transport is chosen by (dist/backend_choice.h)
  HybridComms modeled_hybrid_comms(const TrainConfig::Dist& d, Device device);

  dist::Identity id_;
  double timeout_s_;
  std::string address_;  // this rank's, as its peers dial it
  std::unique_ptr<dist::TcpStore> store_;
  std::unique_ptr<dist::ProcessGroup> group_;
  // hybrid_shard's subgroups and their transports (after the groups: they use them).
  std::vector<std::unique_ptr<dist::ProcessGroup>> subgroups_;
  std::vector<std::unique_ptr<dist::GradientComm>> subgroup_comms_;
};

}  // namespace cg::train
