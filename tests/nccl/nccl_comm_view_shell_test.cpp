// nccl_comm_view where no device is needed: what the type promises, and the raw handles a
// view refuses before NCCL reads them.

#include <gtest/gtest.h>
#include <nccl.h>

#include <cstddef>
#include <graphstep/error.hpp>
#include <graphstep/nccl/nccl_comm.hpp>
#include <graphstep/nccl/nccl_comm_view.hpp>
#include <string>
#include <type_traits>

namespace gs = graphstep;
namespace gn = graphstep::nccl;

// A view is made explicitly from a raw handle, implicitly from an owning communicator, and is
// never empty: no default constructor, and moving copies.
static_assert(std::is_constructible_v<gn::nccl_comm_view, ncclComm_t>);
static_assert(!std::is_convertible_v<ncclComm_t, gn::nccl_comm_view>);
static_assert(!std::is_convertible_v<std::nullptr_t, gn::nccl_comm_view>);
static_assert(!std::is_default_constructible_v<gn::nccl_comm_view>);
static_assert(std::is_nothrow_copy_constructible_v<gn::nccl_comm_view>);
static_assert(std::is_nothrow_copy_assignable_v<gn::nccl_comm_view>);
static_assert(std::is_convertible_v<gn::nccl_comm const&, gn::nccl_comm_view>);

TEST(nccl_comm_view_raw, a_null_handle_is_a_usage_error) {
  ncclComm_t const none = nullptr;
  try {
    gn::nccl_comm_view const view{none};
    FAIL() << "a view of a null handle was made";
  } catch (gs::usage_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("nccl_comm_view: the ncclComm_t is null"), std::string::npos) << what;
  }
}

TEST(nccl_comm_view_raw, adopting_a_null_handle_is_a_usage_error) {
  try {
    static_cast<void>(gn::nccl_comm::adopt(nullptr));
    FAIL() << "a null handle was adopted";
  } catch (gs::usage_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("nccl_comm::adopt: the handle is null"), std::string::npos) << what;
  }
}
