// LeaderElection: one cruxd instance's campaign for leadership on etcd, and the fence that
// stops a leader from acting once it can no longer be sure it leads.
//
// Algorithm (etcd's own election recipe, clientv3/concurrency, done with plain transactions):
// each instance holds a lease (TTL `ttl`, kept alive every ttl/3) and one key
// `<prefix>/election/<lease id hex>` attached to it, created with a transaction guarded by
// `create_revision == 0`. The key with the lowest create revision leads; its create revision is
// the leader's **term** (etcd revisions only grow, so a later leader always has a higher term).
// Every `poll` the instance lists the election keys (sorted by create revision): that is how a
// standby notices that the keys before it are gone (their leases expired or were revoked) and
// how cruxctl learns who leads and who stands by.
//
// Fencing (the Patroni rule): the lease deadline is measured locally on the monotonic clock from
// the *send* time of the last successful keep-alive (etcd expires the lease no earlier than
// that + TTL). MayAct() is true only while this instance leads and now < deadline - margin
// (margin = ttl / 6): the caller checks it before every push, so a leader that cannot renew
// (etcd unreachable, quorum lost, process paused) stops acting by itself before its lease runs
// out, and a paused leader that wakes up finds MayAct() false at once, before this thread has
// even run. Losing leadership is final for this object: `deposed` is called once and the thread
// ends (cruxd exits and systemd restarts it as a standby: docs/daemon.md).
//
// Thread-safety: the campaign runs on a thread of its own ("crux-ha"); MayAct(), term(), view()
// and Resign() are thread-safe. The callbacks run on that thread.
#ifndef CRUX_DAEMON_HA_ELECTION_H_
#define CRUX_DAEMON_HA_ELECTION_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "crux/core/base/status.h"
#include "crux/core/base/units.h"
#include "crux/daemon/ha/etcd.h"

namespace crux::daemon::ha {

enum class Role { kCampaigning, kStandby, kLeader, kDeposed };
const char* RoleName(Role r);

struct Member {
  std::string instance;
  std::string client_endpoint;
  std::string admin_endpoint;
  int64_t create_revision = 0;
  bool leader = false;
  friend bool operator==(const Member&, const Member&) = default;
};

struct ElectionView {
  Role role = Role::kCampaigning;
  int64_t term = 0;    // This instance's term while it leads; else the leader's.
  std::string leader;  // The leader's instance name ("" when none is known).
  std::string leader_client_endpoint;
  std::vector<Member> members;  // Every campaigning instance, leader first.
  std::string last_error;       // The last etcd failure ("" after a success).
  // Counters since this object started (the crux_ha_* metrics, docs/daemon.md):
  // the leader's term changed to another one (a new leader; the first leader seen is no change),
  uint64_t leader_changes = 0;
  // this instance's fence closed while it led, by reason: "lease" (not renewed in time),
  // "deposed" (its key gone, a lower revision, the lease expired in etcd), "resigned",
  std::map<std::string, uint64_t> fence_closes;
  // failed etcd calls by operation: "campaign", "keepalive", "list", "revoke".
  std::map<std::string, uint64_t> etcd_errors;
};

struct ElectionOptions {
  std::string prefix = "/crux/cruxd";  // Election keys live under <prefix>/election/.
  std::string instance;                // This instance's name (shown to cruxctl), non-empty.
  std::string client_endpoint;         // Where clients reach it when it leads.
  std::string admin_endpoint;
  core::Duration ttl = core::Duration::Millis(3000);  // Lease TTL, whole seconds >= 1.
  core::Duration poll = core::Duration::Millis(200);  // How often the keys are listed.
  // Called on the campaign thread with the view after every round, and when the fence closes
  // (before `deposed`); may be empty. For metrics (Leadership exports ElectionView's counters).
  std::function<void(const ElectionView&)> on_view;
};

class LeaderElection {
 public:
  using Elected = std::function<void(int64_t term)>;
  using Deposed = std::function<void(const std::string& why)>;

  // Starts the campaign thread. `etcd` is used by that thread only.
  LeaderElection(ElectionOptions options, std::unique_ptr<Etcd> etcd, Elected elected,
                 Deposed deposed);
  // Stops the thread; with Resign() called before, the lease is revoked (immediate takeover).
  ~LeaderElection();
  LeaderElection(const LeaderElection&) = delete;
  LeaderElection& operator=(const LeaderElection&) = delete;

  // Graceful stop: closes the fence and revokes the lease (the next instance leads at once).
  // Blocks until done (at most one etcd timeout per endpoint).
  void Resign();

  bool MayAct() const;
  int64_t term() const { return term_.load(); }
  std::string key() const;  // This instance's election key ("" before it has one).
  ElectionView view() const;

 private:
  void Run();
  bool Step();  // One round; false once deposed or stopping.
  core::Status Campaign();
  // `reason`: the fence_closes key ("lease", "deposed").
  void Depose(const std::string& why, const char* reason);
  // Records a failed etcd call of operation `op` (last_error, etcd_errors).
  void SetError(const char* op, const std::string& e);
  void Notify();  // options_.on_view with the view.
  static int64_t NowNs();

  const ElectionOptions options_;
  std::unique_ptr<Etcd> etcd_;
  Elected elected_;
  Deposed deposed_;

  std::atomic<bool> leader_{false};
  std::atomic<int64_t> deadline_ns_{0};  // Monotonic ns: the lease may expire from then on.
  std::atomic<int64_t> term_{0};
  const int64_t margin_ns_;

  // Campaign thread state.
  int64_t lease_ = 0;
  int64_t next_keepalive_ns_ = 0;
  bool deposed_called_ = false;
  int64_t last_leader_term_ = 0;  // The last non-zero leader term listed.

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string key_;
  ElectionView view_;
  std::thread thread_;
};

}  // namespace crux::daemon::ha

#endif  // CRUX_DAEMON_HA_ELECTION_H_
