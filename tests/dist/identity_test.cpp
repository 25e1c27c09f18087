// Rank, world size and rendezvous address from each launcher's environment variables.
#include <gtest/gtest.h>

#include <map>

#include "dist/identity.h"
#include "util/check.h"

namespace cg::dist {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

TEST(Identity, NothingSetIsOneProcess) {
  Identity id = identity_from_env(env_of({}));
  EXPECT_EQ(id.rank, 0);
  EXPECT_EQ(id.world_size, 1);
  EXPECT_FALSE(id.is_distributed());
}

TEST(Identity, Torchrun) {
  Identity id = identity_from_env(env_of({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"},
                                          {"MASTER_ADDR", "10.0.0.2"}, {"MASTER_PORT", "1234"}}));
  EXPECT_EQ(id.rank, 3);
  EXPECT_EQ(id.world_size, 8);
  EXPECT_EQ(id.local_rank, 1);
  EXPECT_EQ(id.master_addr, "10.0.0.2");
  EXPECT_EQ(id.master_port, 1234);
}

TEST(Identity, OpenMpiMpichAndSlurm) {
  Identity mpi = identity_from_env(env_of({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                                           {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}));
  EXPECT_EQ(mpi.rank, 1);
  EXPECT_EQ(mpi.world_size, 2);
  EXPECT_EQ(mpi.source, "Open MPI");
  Identity hydra = identity_from_env(env_of({{"PMI_RANK", "2"}, {"PMI_SIZE", "4"}}));
  EXPECT_EQ(hydra.rank, 2);
  EXPECT_EQ(hydra.local_rank, 2);
  Identity slurm = identity_from_env(env_of({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "1"}}));
  EXPECT_EQ(slurm.rank, 5);
  EXPECT_EQ(slurm.local_rank, 1);
}

TEST(Identity, LocalWorldSizeFromEachLauncherElseTheWholeWorld) {
  EXPECT_EQ(identity_from_env(env_of({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"},
                                      {"LOCAL_WORLD_SIZE", "2"}}))
                .local_world_size,
            2);
  EXPECT_EQ(identity_from_env(env_of({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}))
                .local_world_size,
            2);
  EXPECT_EQ(identity_from_env(env_of({{"PMI_RANK", "0"}, {"PMI_SIZE", "4"}, {"MPI_LOCALNRANKS", "4"}}))
                .local_world_size,
            4);
  Identity slurm = identity_from_env(env_of({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"},
                                             {"SLURM_NTASKS_PER_NODE", "3"}}));
  EXPECT_EQ(slurm.local_world_size, 3);
  EXPECT_EQ(slurm.local_rank, 2);  // no SLURM_LOCALID: rank modulo the ranks per node
  EXPECT_EQ(identity_from_env(env_of({{"RANK", "1"}, {"WORLD_SIZE", "3"}})).local_world_size, 3);
  EXPECT_EQ(identity_from_env(env_of({})).local_world_size, 1);
}

// What srun sets (and nothing else): the node count, the compressed tasks per node, the node
// list and the job id give the local world size and the rendezvous address and port.
TEST(Identity, SrunVariablesAloneGiveTheRendezvous) {
  Identity one_node = identity_from_env(env_of({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "1"},
                                                {"SLURM_NODEID", "0"}, {"SLURM_STEP_NUM_NODES", "1"},
                                                {"SLURM_STEP_TASKS_PER_NODE", "2"}, {"SLURM_STEP_NODELIST", "n7"},
                                                {"SLURM_JOB_ID", "123456"}}));
  EXPECT_EQ(one_node.source, "Slurm");
  EXPECT_EQ(one_node.local_world_size, 2);
  EXPECT_EQ(one_node.master_addr, "127.0.0.1");
  EXPECT_EQ(one_node.master_port, 15000 + 3456);
  Identity third_node = identity_from_env(env_of({{"SLURM_PROCID", "6"}, {"SLURM_NTASKS", "7"}, {"SLURM_LOCALID", "0"},
                                                  {"SLURM_NODEID", "2"}, {"SLURM_STEP_NUM_NODES", "3"},
                                                  {"SLURM_STEP_TASKS_PER_NODE", "3(x2),1"},
                                                  {"SLURM_STEP_NODELIST", "gpu[003-004,012]-ib,cpu7"}}));
  EXPECT_EQ(third_node.local_world_size, 1);
  EXPECT_EQ(third_node.master_addr, "gpu003-ib");
  EXPECT_EQ(third_node.master_port, 29500);  // no job id: the default
  Identity second = identity_from_env(env_of({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "7"}, {"SLURM_NODEID", "1"},
                                              {"SLURM_NNODES", "3"}, {"SLURM_TASKS_PER_NODE", "3(x2),1"},
                                              {"SLURM_JOB_NODELIST", "a1,a2,a3"}}));
  EXPECT_EQ(second.local_world_size, 3);
  EXPECT_EQ(second.local_rank, 1);  // no SLURM_LOCALID: 4 % 3
  EXPECT_EQ(second.master_addr, "a1");
  // Exported MASTER_ADDR / MASTER_PORT win over what Slurm implies.
  Identity exported = identity_from_env(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_NNODES", "2"},
                                                {"SLURM_JOB_NODELIST", "a[1-2]"}, {"SLURM_JOB_ID", "7"},
                                                {"MASTER_ADDR", "10.1.2.3"}, {"MASTER_PORT", "4000"}}));
  EXPECT_EQ(exported.master_addr, "10.1.2.3");
  EXPECT_EQ(exported.master_port, 4000);
  EXPECT_THROW(identity_from_env(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_NNODES", "2"}})), Error);
}

TEST(Identity, InconsistentValuesNameTheVariable) {
  auto message = [](std::map<std::string, std::string> vars) {
    try {
      identity_from_env(env_of(vars));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message({{"RANK", "x"}, {"WORLD_SIZE", "2"}}).find("RANK"), std::string::npos);
  EXPECT_NE(message({{"RANK", "1"}}).find("WORLD_SIZE"), std::string::npos);
  EXPECT_NE(message({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("outside"), std::string::npos);
  EXPECT_NE(message({{"MASTER_PORT", "70000"}}).find("MASTER_PORT"), std::string::npos);
  EXPECT_NE(message({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "3"}}).find("LOCAL_WORLD_SIZE"),
            std::string::npos);
  EXPECT_NE(message({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}})
                .find("LOCAL_RANK"),
            std::string::npos);
}

}  // namespace
}  // namespace cg::dist
