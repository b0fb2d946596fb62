// Small strongly typed ids used across the core.
//
//   StringId name = strings.intern("matmul");
//   NodeId child = tree.child(kRootNode, name);
//
// Plain value types; thread-safe to copy.
#pragma once

#include <cstdint>
#include <functional>

namespace proton {

template <typename Tag, typename Rep = uint32_t>
struct Id {
  Rep value{};
  constexpr Id() = default;
  constexpr explicit Id(Rep v) : value(v) {}
  constexpr bool operator==(const Id &) const = default;
  constexpr auto operator<=>(const Id &) const = default;
};

using StringId = Id<struct StringTag>;
using NodeId = Id<struct NodeTag>;
using SessionId = Id<struct SessionTag, int32_t>;
using PhaseId = Id<struct PhaseTag, uint64_t>;
using CorrelationId = Id<struct CorrelationTag, uint64_t>;

inline constexpr NodeId kRootNode{0};
inline constexpr NodeId kNoNode{UINT32_MAX};

}  // namespace proton

template <typename Tag, typename Rep>
struct std::hash<proton::Id<Tag, Rep>> {
  size_t operator()(proton::Id<Tag, Rep> id) const noexcept { return std::hash<Rep>{}(id.value); }
};
