// The pieces of gathering a sharded optimizer's state back whole, shared by the strategies that
// shard it (ShardedBuckets: sharded_state.cpp; FullShard: full_shard_state.cpp). Each kind of
// state goes through a flat buffer laid out as the parameters: every rank writes the shards it
// holds, an all-gather fills in the rest, and the flat buffer is cut back into whole tensors.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "dist/gradient_comm.h"
#include "nn/optimizer.h"

namespace cg::dist::state {

using StateShards = std::map<std::string, std::map<std::string, Tensor>>;  // kind -> param -> shard

// The optimizer's state tensors by kind and parameter.
StateShards shards_by_kind(const nn::Optimizer& optimizer);

// Per kind, two flags averaged over the ranks, so every rank agrees even if it holds none: flags[2k]
// (the kind exists somewhere) and flags[2k + 1] (it is a per-parameter scalar, as AdamW's step).
std::vector<float> agree_on_kinds(GradientComm& comm, const std::vector<std::string>& kinds, StateShards& mine,
                                  Device device, const Stream& s);

// Writes this rank's shards of one kind into `flat` (laid out as `params` at `param_offset`): a
// scalar over all its owned elements of the parameter, a tensor copied.
void write_owned_shards(Tensor& flat, const nn::NamedTensors& params, const std::vector<int64_t>& param_offset,
                        const std::map<std::string, nn::Optimizer::Range>& owned,
                        const std::map<std::string, Tensor>& shards, Device device);

// The gathered kinds cut back into whole tensors, in the unsharded order: parameter by parameter,
// kind by kind.
nn::NamedTensors unsharded_state(const nn::NamedTensors& params, const std::vector<int64_t>& param_offset,
                                 const std::vector<std::string>& kinds, const std::vector<float>& flags,
                                 const std::map<std::string, Tensor>& gathered);

}  // namespace cg::dist::state
