// Which transport carries DDP's gradients (dist/gradient_comm.h), from dist.backend and what the
// job looks like. Pure, so the rules are tested on any machine:
//   modeled            one process standing for an N-rank ring (refused with more processes);
//   one process        nothing to communicate;
//   CPU tensors        Gloo (nccl is refused);
//   CUDA tensors       auto: NCCL when every rank on this node has a GPU of its own, else Gloo
//                      staged through pinned host memory, since NCCL refuses two ranks on one GPU
//                      ("Duplicate GPU detected"); nccl: refused when ranks would share a GPU;
//                      gloo: staged Gloo.
#pragma once
#include <string>

#include "util/enum_names.h"

namespace cg::dist {

// dist.backend. "modeled": one real rank whose all-reduces occupy the communication stream as long
// as a ring all-reduce over dist.modeled_* would take.
enum class BackendRequest { auto_select, nccl, gloo, modeled };
inline EnumNames<BackendRequest> enum_names(BackendRequest) {
  return {{BackendRequest::auto_select, "auto"}, {BackendRequest::nccl, "nccl"}, {BackendRequest::gloo, "gloo"},
          {BackendRequest::modeled, "modeled"}};
}
enum class Transport { none, host_gloo, staged_gloo, nccl, modeled };

struct TransportChoice {
  Transport transport = Transport::none;
  std::string why;  // one line for the log
};

struct JobShape {
  bool cuda_tensors = false;
  int world_size = 1;
  int local_world_size = 1;  // processes on this node
  int visible_gpus = 0;      // on this node
};

// Throws UsageError naming the setting when the request cannot work.
TransportChoice choose_transport(BackendRequest requested, const JobShape& job);

}  // namespace cg::dist
