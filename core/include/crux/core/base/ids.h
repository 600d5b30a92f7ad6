// Strong integer ids for graph entities, and the one rule for the names that identify things
// across Crux's boundaries (topology nodes, job ids, the wire protocol's ids).
//
// StrongId: an index into the owning container (Topology::node(), Topology::link()); a
// default-constructed id is invalid. Value types, thread-compatible.
//
// Names. Grammar (ASCII only, case-sensitive):
//   name      = 1*128 name-char
//   name-char = "A"-"Z" / "a"-"z" / "0"-"9" / "." / "_" / ":" / "/" / "-"
// Every topology node (Topology::AddNode, so every builder and topology file), every job id
// crux-plan reads and every id of the wire protocol (protocol::IsValidId) obeys it. The rule
// admits every generated name ("host12/nic1", "tor3", "agg0") and the Lingjun switch labels
// ("G6", "P10", "S14", "P10/S14"); it excludes spaces, quotes, '>' (link names are
// "a -> b"), control characters and non-ASCII bytes, so a name is always safe to print, to
// use as a map key or file-name fragment, and to embed in "a -> b".
//
// QuoteName: a name (valid or not, e.g. the one an error refuses) as shown in messages.
// Pure functions, thread-safe.
#ifndef CRUX_CORE_BASE_IDS_H_
#define CRUX_CORE_BASE_IDS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>

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

// ---- Names (grammar above) ----

inline constexpr size_t kMaxNameLength = 128;
// The rule in words, for error messages: "... (allowed: " + kNameRule + ")".
inline constexpr std::string_view kNameRule = "1-128 characters of [A-Za-z0-9._:/-]";

constexpr bool IsNameChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == ':' || c == '/' || c == '-';
}

// True iff `name` matches the grammar: 1..kMaxNameLength name characters.
constexpr bool IsValidName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  for (char c : name) {
    if (!IsNameChar(c)) return false;
  }
  return true;
}

// `name` quoted for a message: 'name', its first 64 bytes only ("..." marks the cut), escaped
// with EscapeForTerminal (text.h) so that a refused name cannot put control characters on a
// terminal. E.g. QuoteName("a\x1b[2J") == "'a\\x1b[2J'".
std::string QuoteName(std::string_view name);

}  // namespace crux::core

template <typename Tag>
struct std::hash<crux::core::StrongId<Tag>> {
  size_t operator()(crux::core::StrongId<Tag> id) const noexcept {
    return std::hash<uint32_t>()(id.value());
  }
};

#endif  // CRUX_CORE_BASE_IDS_H_
