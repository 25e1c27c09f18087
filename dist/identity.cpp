#include "dist/identity.h"

#include <algorithm>
#include <cstdio>
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

// Slurm writes per-node task counts compressed: "2(x3),1" is 2 tasks on each of three nodes, then 1.
// Returns the count of node `node` (SLURM_NODEID), or nothing when the text cannot be read.
std::optional<int> slurm_tasks_on_node(const std::string& list, int node) {
  size_t pos = 0;
  while (pos < list.size()) {
    const size_t end = std::min(list.find(',', pos), list.size());
    const std::string item = list.substr(pos, end - pos);
    int tasks = 0, repeat = 1;
    if (std::sscanf(item.c_str(), "%d(x%d)", &tasks, &repeat) < 1 || tasks < 1 || repeat < 1) return std::nullopt;
    if (node < repeat) return tasks;
    node -= repeat;
    pos = end + 1;
  }
  return std::nullopt;
}

// The first host of a Slurm node list ("gpu[003-010,012],cpu7" -> "gpu003"), where srun puts task
// 0 with its default block distribution.
std::string slurm_first_host(const std::string& list) {
  const size_t bracket = list.find('['), comma = list.find(',');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket))
    return list.substr(0, comma);
  const size_t first_end = list.find_first_of("-,]", bracket + 1), close = list.find(']', bracket);
  const std::string suffix = close == std::string::npos ? "" : list.substr(close + 1, list.find(',', close) - close - 1);
  return list.substr(0, bracket) + list.substr(bracket + 1, first_end - bracket - 1) + suffix;
}

// srun sets no rendezvous address: rank 0 runs on the first node of the step, and one node means
// this one. The port comes from the job id (like PyTorch Lightning), so that two jobs sharing a
// node do not collide; MASTER_ADDR and MASTER_PORT, when exported, win.
void slurm_rendezvous(const EnvLookup& env, Identity& id) {
  const int nodes = parse_int(env, env("SLURM_STEP_NUM_NODES") ? "SLURM_STEP_NUM_NODES" : "SLURM_NNODES", 1);
  if (!env("MASTER_ADDR") && nodes > 1) {
    const auto list = env("SLURM_STEP_NODELIST") ? env("SLURM_STEP_NODELIST") : env("SLURM_JOB_NODELIST");
    if (!list) throw Error("Slurm job on several nodes without SLURM_STEP_NODELIST: set MASTER_ADDR");
    id.master_addr = slurm_first_host(*list);
  }
  if (!env("MASTER_PORT") && env("SLURM_JOB_ID")) id.master_port = 15000 + parse_int(env, "SLURM_JOB_ID", 0) % 10000;
}

// Without the launcher's local size, the processes on this node: for Slurm, its compressed
// per-node counts (srun always sets them) at this node; else all `world_size` of them.
int local_size_guess(const EnvLookup& env, const Scheme& s, int world_size) {
  if (std::string(s.source) != "Slurm") return world_size;
  const auto counts = env("SLURM_STEP_TASKS_PER_NODE") ? env("SLURM_STEP_TASKS_PER_NODE") : env("SLURM_TASKS_PER_NODE");
  if (!counts) return world_size;
  return slurm_tasks_on_node(*counts, parse_int(env, "SLURM_NODEID", 0)).value_or(world_size);
}

// Reads rank, world size and the local ones from launcher `s`'s variables into `id`, refusing a
// local size or rank that does not fit the world.
void read_scheme(const EnvLookup& env, const Scheme& s, Identity& id) {
  id.source = s.source;
  id.rank = parse_int(env, s.rank, 0);
  id.world_size = parse_int(env, s.size, -1);
  if (id.world_size < 0)
    throw Error(fmt::format("{} is set but {} is not", s.rank, s.size));
  id.local_world_size = parse_int(env, s.local_size, local_size_guess(env, s, id.world_size));
  id.local_rank = parse_int(env, s.local_rank, id.rank % std::max(id.local_world_size, 1));
  if (id.world_size >= 1 &&
      (id.local_world_size < 1 || id.local_world_size > id.world_size || id.local_rank >= id.local_world_size))
    throw Error(fmt::format("{}={} does not fit {}={} and {}={}", s.local_size, id.local_world_size, s.size,
                            id.world_size, s.local_rank, id.local_rank));
}

}  // namespace

std::optional<std::string> process_env(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  return v ? std::optional<std::string>(v) : std::nullopt;
}

Identity identity_from_env(const EnvLookup& env) {
  Identity id;
  for (const Scheme& s : kSchemes) {
    if (!env(s.rank)) continue;
    read_scheme(env, s, id);
    break;
  }
  if (id.world_size < 1 || id.rank < 0 || id.rank >= id.world_size)
    throw Error(fmt::format("rank {} is outside a world of {} processes ({})", id.rank,
                            id.world_size, id.source));
  if (id.local_rank < 0) throw Error(fmt::format("negative local rank {}", id.local_rank));
  if (id.source == "Slurm") slurm_rendezvous(env, id);
  if (auto addr = env("MASTER_ADDR")) id.master_addr = *addr;
  id.master_port = parse_int(env, "MASTER_PORT", id.master_port);
  if (id.master_port <= 0 || id.master_port > 65535)
    throw Error(fmt::format("MASTER_PORT={} is not a TCP port", id.master_port));
  return id;
}

}  // namespace cg::dist
