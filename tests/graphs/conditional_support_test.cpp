// Which CUDA drivers run conditional nodes (graphs/conditional_support.hpp), and what the refusal
// of an older or absent driver says.

#include <gtest/gtest.h>

#include <graphstep/graphs/conditional_support.hpp>
#include <string>

namespace gs = graphstep;

TEST(conditional_nodes, an_older_driver_is_named_with_the_version_needed) {
  EXPECT_EQ(gs::graphs::conditional_nodes_unsupported_reason(12040), "");
  EXPECT_EQ(gs::graphs::conditional_nodes_unsupported_reason(13000), "");
  std::string const old = gs::graphs::conditional_nodes_unsupported_reason(12020);
  EXPECT_NE(old.find("need a CUDA driver of 12.4 or newer, and this one is 12.2"),
            std::string::npos)
      << old;
  EXPECT_NE(old.find("update the driver"), std::string::npos) << old;
  EXPECT_NE(gs::graphs::conditional_nodes_unsupported_reason(0).find("this one is absent"),
            std::string::npos);
}
