// Etcd: the few etcd v3 calls cruxd's high availability needs (leases, ranges, transactions),
// behind one interface. The backend cruxd runs is the v3 JSON gateway over libcurl
// (etcd_gateway.h); tests run it against a real etcd cluster on loopback.
//
// Keys and values are raw bytes here (the gateway backend base64-encodes them on the wire).
// Revisions and lease ids are etcd's int64 numbers.
//
// Errors: kUnavailable for transport failures (no member reachable, timeout, a failed TLS
// handshake, etcd without a leader) - the caller retries; kFailedPrecondition when etcd refuses
// the client (etcd auth: wrong password, permission denied on a key); kInvalidArgument /
// kInternal for answers that make no sense.
//
// Thread-safety: an Etcd object is used by one thread at a time (each HA thread has its own).
#ifndef CRUX_DAEMON_HA_ETCD_H_
#define CRUX_DAEMON_HA_ETCD_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/base/units.h"

namespace crux::daemon::ha {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;
  friend bool operator==(const KeyValue&, const KeyValue&) = default;
};

// One comparison of a transaction (etcd's Compare): `target` of `key` compared with `number`
// (create/mod revision, version) or `value`. A missing key has create revision 0.
struct Compare {
  enum class Target { kCreateRevision, kModRevision, kVersion, kValue };
  enum class Op { kEqual, kNotEqual, kGreater, kLess };
  std::string key;
  Target target = Target::kCreateRevision;
  Op op = Op::kEqual;
  int64_t number = 0;
  std::string value;
  friend bool operator==(const Compare&, const Compare&) = default;
};

// One operation of a transaction. `range_end` empty: the single key `key`.
struct TxnOp {
  enum class Kind { kPut, kDelete, kRange };
  Kind kind = Kind::kPut;
  std::string key;
  std::string value;      // kPut.
  std::string range_end;  // kDelete, kRange: [key, range_end) (PrefixEnd for a prefix).
  int64_t lease = 0;      // kPut: attach to this lease (0: none).
  friend bool operator==(const TxnOp&, const TxnOp&) = default;

  static TxnOp Put(std::string key, std::string value, int64_t lease = 0);
  static TxnOp Delete(std::string key, std::string range_end = {});
  static TxnOp Get(std::string key, std::string range_end = {});
};

struct TxnResult {
  bool succeeded = false;
  int64_t revision = 0;  // The store revision after the transaction.
  // The key-values of each kRange operation of the branch that ran, in order.
  std::vector<std::vector<KeyValue>> ranges;
};

struct LeaseGrant {
  int64_t id = 0;
  int64_t ttl_s = 0;  // As granted (etcd may raise a TTL below its minimum).
};

struct RangeResult {
  std::vector<KeyValue> kvs;
  int64_t revision = 0;  // The store revision the read saw.
};

struct MemberStatus {
  uint64_t member_id = 0;  // The member that answered.
  uint64_t leader = 0;     // The member id of etcd's Raft leader as it knows it (0: none).
};

class Etcd {
 public:
  virtual ~Etcd() = default;
  virtual core::Result<LeaseGrant> Grant(int64_t ttl_s) = 0;
  // One keep-alive: the lease's remaining TTL in seconds; 0 when the lease no longer exists.
  virtual core::Result<int64_t> KeepAlive(int64_t lease) = 0;
  virtual core::Status Revoke(int64_t lease) = 0;
  // [key, range_end) (empty range_end: the one key), sorted by create revision when asked,
  // else by key.
  virtual core::Result<RangeResult> Range(const std::string& key, const std::string& range_end,
                                          bool by_create_revision = false) = 0;
  // If every compare holds, `success` runs, else `failure`; atomically. etcd limits a
  // transaction to --max-txn-ops operations (default 128).
  virtual core::Result<TxnResult> Txn(const std::vector<Compare>& compares,
                                      const std::vector<TxnOp>& success,
                                      const std::vector<TxnOp>& failure) = 0;
  // The answering member's view of the cluster (etcd's maintenance status).
  virtual core::Result<MemberStatus> Status() = 0;
  // The endpoint the last call used (for logs).
  virtual std::string endpoint() const = 0;
};

// The end of the range of every key starting with `prefix` (etcd's prefix rule: the prefix with
// its last byte below 0xff incremented; "\0" for an empty prefix = every key).
std::string PrefixEnd(const std::string& prefix);

inline constexpr int kMaxTxnOps = 128;  // etcd's default --max-txn-ops.

}  // namespace crux::daemon::ha

#endif  // CRUX_DAEMON_HA_ETCD_H_
