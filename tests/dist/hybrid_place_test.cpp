// hybrid_shard's cut of the job into nodes (dist/sharding.h, hybrid_place): ranks numbered node by
// node, as torchrun and mpirun number them, give each rank its node and its shard; one rank a
// node, uneven nodes or ranks numbered otherwise are refused, saying why.
#include <gtest/gtest.h>

#include "dist/sharding.h"

namespace cg::dist {
namespace {

TEST(HybridPlace, RanksNumberedNodeByNodeGiveNodeAndShard) {
  // 3 nodes of 4 ranks: rank 9 is the second rank of the third node.
  const HybridPlace p = hybrid_place(9, 12, 1, 4);
  EXPECT_EQ(p.why_not, "");
  EXPECT_EQ(p.node, 2);
  EXPECT_EQ(p.nodes, 3);
  EXPECT_EQ(p.local, 1);
  EXPECT_EQ(p.local_world, 4);
  const HybridPlace one_node = hybrid_place(3, 4, 3, 4);
  EXPECT_EQ(one_node.why_not, "");
  EXPECT_EQ(one_node.nodes, 1);
  EXPECT_EQ(one_node.node, 0);
}

TEST(HybridPlace, OneRankANodeUnevenNodesOrOtherNumberingAreRefused) {
  EXPECT_NE(hybrid_place(1, 2, 0, 1).why_not.find("needs several ranks a node"), std::string::npos);
  EXPECT_NE(hybrid_place(4, 5, 0, 2).why_not.find("the same number of ranks"), std::string::npos);
  // Round-robin numbering (rank 1 on the second node as its first rank) is not node by node.
  EXPECT_NE(hybrid_place(1, 4, 0, 2).why_not.find("rank 1 of 4 is local rank 0 of 2"), std::string::npos);
}

}  // namespace
}  // namespace cg::dist
