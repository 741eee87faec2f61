#pragma once

// What every owning handle of graphstep promises about copies and moves.

#include <type_traits>

namespace graphstep::testing {

/// @brief Not copyable, and moved without throwing.
template <typename T>
inline constexpr bool is_move_only_v =
    !std::is_copy_constructible_v<T> && !std::is_copy_assignable_v<T> &&
    std::is_nothrow_move_constructible_v<T> && std::is_nothrow_move_assignable_v<T>;

}  // namespace graphstep::testing
