// Strong integer ids for graph entities. An id is an index into the owning container
// (Topology::node(), Topology::link()); a default-constructed id is invalid.
// Value types, thread-compatible.
#ifndef CRUX_CORE_IDS_H_
#define CRUX_CORE_IDS_H_

#include <cstdint>
#include <functional>
#include <limits>

namespace crux::core {

template <typename Tag>
class StrongId {
 public:
  using ValueType = uint32_t;
  static constexpr ValueType kInvalid = std::numeric_limits<ValueType>::max();

  constexpr StrongId() = default;
  constexpr explicit StrongId(ValueType v) : v_(v) {}

  constexpr ValueType value() const { return v_; }
  constexpr bool valid() const { return v_ != kInvalid; }

  friend constexpr bool operator==(StrongId a, StrongId b) { return a.v_ == b.v_; }
  friend constexpr bool operator!=(StrongId a, StrongId b) { return a.v_ != b.v_; }
  friend constexpr bool operator<(StrongId a, StrongId b) { return a.v_ < b.v_; }

 private:
  ValueType v_ = kInvalid;
};

struct NodeIdTag {};
struct LinkIdTag {};

using NodeId = StrongId<NodeIdTag>;  // A host, NIC, intra-host switch or network switch.
using LinkId = StrongId<LinkIdTag>;  // One direction of a full-duplex link.

}  // namespace crux::core

template <typename Tag>
struct std::hash<crux::core::StrongId<Tag>> {
  size_t operator()(crux::core::StrongId<Tag> id) const noexcept {
    return std::hash<uint32_t>()(id.value());
  }
};

#endif  // CRUX_CORE_IDS_H_
