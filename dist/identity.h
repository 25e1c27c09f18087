// Who this process is in a data-parallel job, read from the launcher's environment: torchrun and
// cudagrad-launch (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), Open MPI
// (OMPI_COMM_WORLD_*), MPICH/Hydra (PMI_RANK, PMI_SIZE) and Slurm (SLURM_PROCID, ...). None set
// means a single process. Inconsistent values fail naming the variables. Under srun, which sets
// no rendezvous variables, rank 0's node is the first of SLURM_STEP_NODELIST (this node when the
// step has one) and the port is 15000 + SLURM_JOB_ID % 10000, unless MASTER_ADDR/MASTER_PORT say.
#pragma once
#include <functional>
#include <optional>
#include <string>

namespace cg::dist {

struct Identity {
  int rank = 0;
  int local_rank = 0;  // picks the GPU on this node
  int world_size = 1;
  // Processes on this node (LOCAL_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS,
  // SLURM_NTASKS_PER_NODE or this node's entry of SLURM_STEP_TASKS_PER_NODE); when the launcher does not say, the whole world, as if on one node:
  // the cautious guess for deciding whether ranks must share GPUs.
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string source = "single process";  // which launcher's variables were used
  bool is_distributed() const { return world_size > 1; }
};

// Looks a variable up; the default reads the process environment. Tests pass a map instead.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
std::optional<std::string> process_env(const std::string& name);

Identity identity_from_env(const EnvLookup& env = process_env);

}  // namespace cg::dist
