#include "dist/identity.h"

#include <algorithm>
#include <cstdlib>

#include "util/check.h"

namespace cg::dist {
namespace {

int parse_int(const EnvLookup& env, const std::string& name, int fallback) {
  auto v = env(name);
  if (!v) return fallback;
  try {
    size_t used = 0;
    const int value = std::stoi(*v, &used);
    if (used == v->size()) return value;
  } catch (const std::exception&) {
  }
  throw Error(fmt::format("environment variable {}='{}' is not an integer", name, *v));
}

// The first launcher whose rank variable is set wins, in this order: torchrun-style variables
// are explicit choices, MPI and Slurm ones are inherited from the surrounding job.
struct Scheme {
  const char* source;
  const char* rank;
  const char* size;
  const char* local_rank;
  const char* local_size;
};
constexpr Scheme kSchemes[] = {
    {"torchrun/cudagrad-launch", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"MPICH/Hydra", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
};

}  // namespace

std::optional<std::string> process_env(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  return v ? std::optional<std::string>(v) : std::nullopt;
}

Identity identity_from_env(const EnvLookup& env) {
  Identity id;
  for (const Scheme& s : kSchemes) {
    if (!env(s.rank)) continue;
    id.source = s.source;
    id.rank = parse_int(env, s.rank, 0);
    id.world_size = parse_int(env, s.size, -1);
    if (id.world_size < 0)
      throw Error(fmt::format("{} is set but {} is not", s.rank, s.size));
    id.local_world_size = parse_int(env, s.local_size, id.world_size);
    id.local_rank = parse_int(env, s.local_rank, id.rank % std::max(id.local_world_size, 1));
    if (id.world_size >= 1 &&
        (id.local_world_size < 1 || id.local_world_size > id.world_size || id.local_rank >= id.local_world_size))
      throw Error(fmt::format("{}={} does not fit {}={} and {}={}", s.local_size, id.local_world_size, s.size,
                              id.world_size, s.local_rank, id.local_rank));
    break;
  }
  if (id.world_size < 1 || id.rank < 0 || id.rank >= id.world_size)
    throw Error(fmt::format("rank {} is outside a world of {} processes ({})", id.rank,
                            id.world_size, id.source));
  if (id.local_rank < 0) throw Error(fmt::format("negative local rank {}", id.local_rank));
  if (auto addr = env("MASTER_ADDR")) id.master_addr = *addr;
  id.master_port = parse_int(env, "MASTER_PORT", id.master_port);
  if (id.master_port <= 0 || id.master_port > 65535)
    throw Error(fmt::format("MASTER_PORT={} is not a TCP port", id.master_port));
  return id;
}

}  // namespace cg::dist
