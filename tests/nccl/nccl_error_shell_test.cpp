// GRAPHSTEP_NCCL_TRY (error.hpp) against NCCL's own result codes and texts.

#include <gtest/gtest.h>
#include <nccl.h>

#include <graphstep/error.hpp>
#include <string>

TEST(nccl_try, names_the_result_and_accepts_in_progress) {
  try {
    GRAPHSTEP_NCCL_TRY(ncclInvalidArgument);
    FAIL() << "no exception";
  } catch (graphstep::nccl_error const& e) {
    EXPECT_EQ(e.code(), ncclInvalidArgument);
    EXPECT_NE(std::string{e.what()}.find("ncclInvalidArgument"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(GRAPHSTEP_NCCL_TRY(ncclInProgress));
  EXPECT_NO_THROW(GRAPHSTEP_NCCL_TRY(ncclSuccess));
}
