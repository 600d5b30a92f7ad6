// libcrux-verbs-shim.so: a libibverbs for NCCL_IBVERBS_LIB (NCCL >= 2.30.3). NCCL dlopens it and
// binds every verbs entry point with dlvsym(handle, name, "IBVERBS_1.1") (a few optional ones at
// IBVERBS_1.8 / 1.10 / 1.12 / 1.16); libibverbs.map gives this library exactly those versioned
// symbols. Each one forwards to the real libibverbs (CRUX_IBVERBS_REAL_LIB, default
// libibverbs.so.1, dlopened privately), except:
//
//   ibv_modify_qp   INIT -> RTR of an RC QP with a global route: the flow label (hence the RoCEv2
//                   UDP source port) and the traffic class come from the job's PinTable
//                   (pin_policy.h); the QP is remembered (device, QPN, remote GID, port).
//                   -> RTS: the QP becomes live (re-pinnable).
//   ibv_destroy_qp  forgets the QP first.
//
// A background thread (started when NCCL opens its first device) keeps a HostdLink to crux-hostd:
// it announces the process (Hello, role verbs) and every QP brought to RTR (QpInfo), receives
// PinTables, and re-pins live QPs whose pinned port changed with mlx5dv_modify_qp_udp_sport (from
// CRUX_MLX5_REAL_LIB, default libmlx5.so.1), reporting each outcome (RepinResult; EOPNOTSUPP on
// NICs or QPs that cannot, e.g. not mlx5, or not in RTS). NCCL's own data path (post_send,
// poll_cq) goes through the context's function table, never through here: the shim costs
// nothing per message.
//
// Fail-safe: if the real library or a symbol is missing, the call fails exactly as a missing
// device would (NULL / ENOSYS / EOPNOTSUPP), and NCCL falls back to its other transports; the
// shim never changes a QP without a pin, so a job without an assignment keeps NCCL's behaviour.
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "crux/hostd/hostd_link.h"
#include "crux/hostd/job_id.h"
#include "crux/sync/thread_annotations.h"
#include "crux/verbs_shim/pin_policy.h"

// verbs.h turns these into inline helpers; the shim defines the exported functions themselves.
#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr

#define CRUX_SHIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace crux::verbs_shim {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The real entry points.
struct Real {
  void* lib = nullptr;
  std::string error;
  ibv_device** (*get_device_list)(int*) = nullptr;
  void (*free_device_list)(ibv_device**) = nullptr;
  const char* (*get_device_name)(ibv_device*) = nullptr;
  ibv_context* (*open_device)(ibv_device*) = nullptr;
  int (*close_device)(ibv_context*) = nullptr;
  int (*get_async_event)(ibv_context*, ibv_async_event*) = nullptr;
  void (*ack_async_event)(ibv_async_event*) = nullptr;
  int (*query_device)(ibv_context*, ibv_device_attr*) = nullptr;
  int (*query_port)(ibv_context*, uint8_t, _compat_ibv_port_attr*) = nullptr;
  int (*query_gid)(ibv_context*, uint8_t, int, ibv_gid*) = nullptr;
  int (*query_qp)(ibv_qp*, ibv_qp_attr*, int, ibv_qp_init_attr*) = nullptr;
  ibv_pd* (*alloc_pd)(ibv_context*) = nullptr;
  int (*dealloc_pd)(ibv_pd*) = nullptr;
  ibv_mr* (*reg_mr)(ibv_pd*, void*, size_t, int) = nullptr;
  ibv_mr* (*reg_mr_iova2)(ibv_pd*, void*, size_t, uint64_t, unsigned int) = nullptr;
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd*, uint64_t, size_t, uint64_t, int, int) = nullptr;
  int (*dereg_mr)(ibv_mr*) = nullptr;
  ibv_cq* (*create_cq)(ibv_context*, int, void*, ibv_comp_channel*, int) = nullptr;
  int (*destroy_cq)(ibv_cq*) = nullptr;
  ibv_qp* (*create_qp)(ibv_pd*, ibv_qp_init_attr*) = nullptr;
  int (*modify_qp)(ibv_qp*, ibv_qp_attr*, int) = nullptr;
  int (*destroy_qp)(ibv_qp*) = nullptr;
  int (*fork_init)() = nullptr;
  const char* (*event_type_str)(ibv_event_type) = nullptr;
  int (*query_ece)(ibv_qp*, ibv_ece*) = nullptr;
  int (*set_ece)(ibv_qp*, ibv_ece*) = nullptr;
  int (*query_port_speed)(ibv_context*, uint8_t, uint64_t*) = nullptr;
  int (*modify_udp_sport)(ibv_qp*, uint16_t) = nullptr;  // mlx5dv, when libmlx5 is there.
};

template <typename F>
void Bind(void* lib, F* fn, const char* name, const char* version) {
  void* p = dlvsym(lib, name, version);
  if (p == nullptr) p = dlsym(lib, name);  // Unversioned builds of the library.
  *fn = reinterpret_cast<F>(p);
}

const Real& R() {
  static const Real* real = [] {
    auto* r = new Real();  // Lives as long as the process (NCCL may call until exit).
    const char* path = std::getenv("CRUX_IBVERBS_REAL_LIB");
    if (path == nullptr || *path == '\0') path = "libibverbs.so.1";
    r->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (r->lib == nullptr) {
      const char* e = dlerror();
      r->error = e != nullptr ? e : path;
      return r;
    }
    void* l = r->lib;
    const char* v = "IBVERBS_1.1";
    Bind(l, &r->get_device_list, "ibv_get_device_list", v);
    Bind(l, &r->free_device_list, "ibv_free_device_list", v);
    Bind(l, &r->get_device_name, "ibv_get_device_name", v);
    Bind(l, &r->open_device, "ibv_open_device", v);
    Bind(l, &r->close_device, "ibv_close_device", v);
    Bind(l, &r->get_async_event, "ibv_get_async_event", v);
    Bind(l, &r->ack_async_event, "ibv_ack_async_event", v);
    Bind(l, &r->query_device, "ibv_query_device", v);
    Bind(l, &r->query_port, "ibv_query_port", v);
    Bind(l, &r->query_gid, "ibv_query_gid", v);
    Bind(l, &r->query_qp, "ibv_query_qp", v);
    Bind(l, &r->alloc_pd, "ibv_alloc_pd", v);
    Bind(l, &r->dealloc_pd, "ibv_dealloc_pd", v);
    Bind(l, &r->reg_mr, "ibv_reg_mr", v);
    Bind(l, &r->reg_mr_iova2, "ibv_reg_mr_iova2", "IBVERBS_1.8");
    Bind(l, &r->reg_dmabuf_mr, "ibv_reg_dmabuf_mr", "IBVERBS_1.12");
    Bind(l, &r->dereg_mr, "ibv_dereg_mr", v);
    Bind(l, &r->create_cq, "ibv_create_cq", v);
    Bind(l, &r->destroy_cq, "ibv_destroy_cq", v);
    Bind(l, &r->create_qp, "ibv_create_qp", v);
    Bind(l, &r->modify_qp, "ibv_modify_qp", v);
    Bind(l, &r->destroy_qp, "ibv_destroy_qp", v);
    Bind(l, &r->fork_init, "ibv_fork_init", v);
    Bind(l, &r->event_type_str, "ibv_event_type_str", v);
    Bind(l, &r->query_ece, "ibv_query_ece", "IBVERBS_1.10");
    Bind(l, &r->set_ece, "ibv_set_ece", "IBVERBS_1.10");
    Bind(l, &r->query_port_speed, "ibv_query_port_speed", "IBVERBS_1.16");
    const char* mlx5 = std::getenv("CRUX_MLX5_REAL_LIB");
    if (mlx5 == nullptr || *mlx5 == '\0') mlx5 = "libmlx5.so.1";
    if (void* m = dlopen(mlx5, RTLD_NOW | RTLD_LOCAL)) {
      Bind(m, &r->modify_udp_sport, "mlx5dv_modify_qp_udp_sport", "MLX5_1.17");
    }
    return r;
  }();
  return *real;
}

// A QP the shim brought (or saw go) to RTR.
struct TrackedQp {
  ibv_qp* qp = nullptr;
  std::string device;
  hostd::Gid remote_gid{};
  hostd::QpInfo info;
  bool live = false;  // In RTS.
};

class Shim {
 public:
  static Shim& Get() {
    static Shim* s = new Shim();  // Never destroyed: NCCL threads may call until exit.
    return *s;
  }

  int ModifyQp(ibv_qp* qp, ibv_qp_attr* attr, int mask) CRUX_EXCLUDES(mu_) {
    const Real& r = R();
    if (r.modify_qp == nullptr) return EOPNOTSUPP;
    if (qp == nullptr || attr == nullptr || (mask & IBV_QP_STATE) == 0) {
      return r.modify_qp(qp, attr, mask);
    }
    if (attr->qp_state == IBV_QPS_RTR && qp->qp_type == IBV_QPT_RC && (mask & IBV_QP_AV) &&
        attr->ah_attr.is_global) {
      return ToRtr(r, qp, attr, mask);
    }
    const int rc = r.modify_qp(qp, attr, mask);
    if (rc == 0 && attr->qp_state == IBV_QPS_RTS) {
      MutexLock lock(&mu_);
      auto it = qps_.find(qp);
      if (it != qps_.end()) it->second.live = true;
    }
    return rc;
  }

  int DestroyQp(ibv_qp* qp) CRUX_EXCLUDES(mu_) {
    const Real& r = R();
    if (r.destroy_qp == nullptr) return EOPNOTSUPP;
    {
      // Under the lock: a re-pin in progress finishes before the QP goes away.
      MutexLock lock(&mu_);
      auto it = qps_.find(qp);
      if (it != qps_.end()) {
        outbox_.push_back(hostd::QpGone{it->second.device, it->second.info.qpn});
        qps_.erase(it);
      }
    }
    return r.destroy_qp(qp);
  }

  // The background thread starts with the first device or QP (not at dlopen).
  void EnsureThread() CRUX_EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    if (started_) return;
    started_ = true;
    std::thread([this] { Run(); }).detach();  // Runs for the life of the process.
  }

 private:
  Shim() = default;

  int ToRtr(const Real& r, ibv_qp* qp, ibv_qp_attr* attr, int mask) CRUX_EXCLUDES(mu_) {
    hostd::Gid gid{};
    std::memcpy(gid.data(), attr->ah_attr.grh.dgid.raw, 16);
    const std::string device =
        qp->context != nullptr && qp->context->device != nullptr ? qp->context->device->name : "";
    RtrPlan plan;
    {
      MutexLock lock(&mu_);
      plan = policy_.PlanRtr(device, gid, attr->ah_attr.grh.traffic_class);
    }
    ibv_qp_attr changed = *attr;  // NCCL's attributes stay untouched.
    if (plan.pinned) changed.ah_attr.grh.flow_label = plan.flow_label;
    if (plan.traffic_class >= 0) {
      changed.ah_attr.grh.traffic_class = static_cast<uint8_t>(plan.traffic_class);
    }
    const int rc = r.modify_qp(qp, &changed, mask);
    if (rc != 0) return rc;
    TrackedQp t;
    t.qp = qp;
    t.device = device;
    t.remote_gid = gid;
    t.info.device = device;
    t.info.port = attr->ah_attr.port_num;
    t.info.qpn = qp->qp_num;
    t.info.dest_qpn = (mask & IBV_QP_DEST_QPN) ? attr->dest_qp_num : 0;
    t.info.remote_gid = hostd::FormatGid(gid);
    t.info.pinned = plan.pinned;
    t.info.sport = plan.pinned ? plan.sport : 0;
    t.info.traffic_class = changed.ah_attr.grh.traffic_class;
    {
      MutexLock lock(&mu_);
      outbox_.push_back(t.info);
      qps_[qp] = std::move(t);
    }
    return 0;
  }

  // Re-pins live QPs whose pinned port changed. Called with mu_ held (a concurrent destroy
  // waits; see DestroyQp).
  void Repin(const Real& r) CRUX_REQUIRES(mu_) {
    for (auto& [qp, t] : qps_) {
      const uint16_t want = policy_.SportFor(t.device, t.remote_gid);
      if (want == 0 || want == t.info.sport) continue;
      hostd::RepinResult res;
      res.device = t.device;
      res.qpn = t.info.qpn;
      res.sport = want;
      if (!t.live) {
        res.error = "QP not in RTS yet (its next RTR uses the new port)";
      } else if (r.modify_udp_sport == nullptr) {
        res.error = "mlx5dv_modify_qp_udp_sport unavailable (no libmlx5: not an mlx5 NIC?)";
      } else {
        const int rc = r.modify_udp_sport(qp, want);
        if (rc == 0) {
          res.ok = true;
          t.info.sport = want;
          t.info.pinned = true;
        } else {
          res.error = std::string("mlx5dv_modify_qp_udp_sport: ") + std::strerror(rc);
        }
      }
      outbox_.push_back(res);
    }
  }

  void Run() CRUX_EXCLUDES(mu_) {
    hostd::HostdLink link(hostd::HostdSocketPath());
    const auto job = hostd::JobIdFromEnvironment([](const char* n) { return std::getenv(n); });
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const int64_t now = NowNs();
      const bool fresh = link.Poll(now);
      std::vector<hostd::Message> send;
      {
        MutexLock lock(&mu_);
        if (fresh) {  // hostd may have restarted: the whole state again.
          hostd::Hello h;
          h.role = hostd::Role::kVerbs;
          h.pid = ::getpid();
          if (job) {
            h.job_id = job->id;
            h.job_source = job->source;
          }
          h.abi = "IBVERBS_1.1";
          send.emplace_back(h);
          for (const auto& [qp, t] : qps_) send.emplace_back(t.info);
          outbox_.clear();  // Replaced by the QPs above.
        }
        for (hostd::Message& m : link.Receive()) {
          if (auto* t = std::get_if<hostd::PinTable>(&m)) {
            core::Status s = policy_.SetTable(*t);
            if (s.ok()) Repin(R());
            outbox_.push_back(hostd::PinAck{t->epoch, t->state_id, s.ok(), s.message()});
          }
        }
        if (link.connected()) {
          for (auto& m : outbox_) send.push_back(std::move(m));
          outbox_.clear();
        } else if (outbox_.size() > 4096) {
          outbox_.clear();  // Replayed from qps_ at the next connection.
        }
      }
      for (const auto& m : send) {
        if (!link.Send(m).ok()) break;
      }
    }
  }

  Mutex mu_;
  PinPolicy policy_ CRUX_GUARDED_BY(mu_);
  std::map<ibv_qp*, TrackedQp> qps_ CRUX_GUARDED_BY(mu_);
  std::vector<hostd::Message> outbox_ CRUX_GUARDED_BY(mu_);
  bool started_ CRUX_GUARDED_BY(mu_) = false;
};

}  // namespace
}  // namespace crux::verbs_shim

namespace vs = crux::verbs_shim;

// --- The exported libibverbs entry points (versions in libibverbs.map) -------------------------

CRUX_SHIM_EXPORT ibv_device** ibv_get_device_list(int* num_devices) {
  const auto& r = vs::R();
  if (r.get_device_list == nullptr) {
    errno = ENOSYS;
    return nullptr;
  }
  return r.get_device_list(num_devices);
}
CRUX_SHIM_EXPORT void ibv_free_device_list(ibv_device** list) {
  if (vs::R().free_device_list != nullptr) vs::R().free_device_list(list);
}
CRUX_SHIM_EXPORT const char* ibv_get_device_name(ibv_device* device) {
  return vs::R().get_device_name != nullptr ? vs::R().get_device_name(device) : nullptr;
}
CRUX_SHIM_EXPORT ibv_context* ibv_open_device(ibv_device* device) {
  if (vs::R().open_device == nullptr) {
    errno = ENOSYS;
    return nullptr;
  }
  vs::Shim::Get().EnsureThread();  // NCCL opens its devices at init, before any QP.
  return vs::R().open_device(device);
}
CRUX_SHIM_EXPORT int ibv_close_device(ibv_context* context) {
  return vs::R().close_device != nullptr ? vs::R().close_device(context) : -1;
}
CRUX_SHIM_EXPORT int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  return vs::R().get_async_event != nullptr ? vs::R().get_async_event(context, event) : -1;
}
CRUX_SHIM_EXPORT void ibv_ack_async_event(ibv_async_event* event) {
  if (vs::R().ack_async_event != nullptr) vs::R().ack_async_event(event);
}
CRUX_SHIM_EXPORT int ibv_query_device(ibv_context* context, ibv_device_attr* attr) {
  return vs::R().query_device != nullptr ? vs::R().query_device(context, attr) : EOPNOTSUPP;
}
// libibverbs exports the IBVERBS_1.1 symbol with its compat port-attribute struct; the pointer
// passes through untouched.
CRUX_SHIM_EXPORT int ibv_query_port(ibv_context* context, uint8_t port,
                                    _compat_ibv_port_attr* attr) {
  return vs::R().query_port != nullptr ? vs::R().query_port(context, port, attr) : EOPNOTSUPP;
}
CRUX_SHIM_EXPORT int ibv_query_gid(ibv_context* context, uint8_t port, int index, ibv_gid* gid) {
  return vs::R().query_gid != nullptr ? vs::R().query_gid(context, port, index, gid) : -1;
}
CRUX_SHIM_EXPORT int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init) {
  return vs::R().query_qp != nullptr ? vs::R().query_qp(qp, attr, mask, init) : EOPNOTSUPP;
}
CRUX_SHIM_EXPORT ibv_pd* ibv_alloc_pd(ibv_context* context) {
  return vs::R().alloc_pd != nullptr ? vs::R().alloc_pd(context) : nullptr;
}
CRUX_SHIM_EXPORT int ibv_dealloc_pd(ibv_pd* pd) {
  return vs::R().dealloc_pd != nullptr ? vs::R().dealloc_pd(pd) : EOPNOTSUPP;
}
CRUX_SHIM_EXPORT ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return vs::R().reg_mr != nullptr ? vs::R().reg_mr(pd, addr, length, access) : nullptr;
}
CRUX_SHIM_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                                          unsigned int access) {
  if (vs::R().reg_mr_iova2 == nullptr) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return vs::R().reg_mr_iova2(pd, addr, length, iova, access);
}
CRUX_SHIM_EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t length,
                                           uint64_t iova, int fd, int access) {
  if (vs::R().reg_dmabuf_mr == nullptr) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  return vs::R().reg_dmabuf_mr(pd, offset, length, iova, fd, access);
}
CRUX_SHIM_EXPORT int ibv_dereg_mr(ibv_mr* mr) {
  return vs::R().dereg_mr != nullptr ? vs::R().dereg_mr(mr) : EOPNOTSUPP;
}
CRUX_SHIM_EXPORT ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* user,
                                       ibv_comp_channel* channel, int vector) {
  return vs::R().create_cq != nullptr ? vs::R().create_cq(context, cqe, user, channel, vector)
                                      : nullptr;
}
CRUX_SHIM_EXPORT int ibv_destroy_cq(ibv_cq* cq) {
  return vs::R().destroy_cq != nullptr ? vs::R().destroy_cq(cq) : EOPNOTSUPP;
}
CRUX_SHIM_EXPORT ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (vs::R().create_qp == nullptr) {
    errno = ENOSYS;
    return nullptr;
  }
  vs::Shim::Get().EnsureThread();
  return vs::R().create_qp(pd, attr);
}
CRUX_SHIM_EXPORT int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  return vs::Shim::Get().ModifyQp(qp, attr, mask);
}
CRUX_SHIM_EXPORT int ibv_destroy_qp(ibv_qp* qp) { return vs::Shim::Get().DestroyQp(qp); }
CRUX_SHIM_EXPORT int ibv_fork_init() {
  return vs::R().fork_init != nullptr ? vs::R().fork_init() : EOPNOTSUPP;
}
CRUX_SHIM_EXPORT const char* ibv_event_type_str(ibv_event_type event) {
  return vs::R().event_type_str != nullptr ? vs::R().event_type_str(event) : "unknown";
}
CRUX_SHIM_EXPORT int ibv_query_ece(ibv_qp* qp, ibv_ece* ece) {
  return vs::R().query_ece != nullptr ? vs::R().query_ece(qp, ece) : EOPNOTSUPP;
}
CRUX_SHIM_EXPORT int ibv_set_ece(ibv_qp* qp, ibv_ece* ece) {
  return vs::R().set_ece != nullptr ? vs::R().set_ece(qp, ece) : EOPNOTSUPP;
}
CRUX_SHIM_EXPORT int ibv_query_port_speed(ibv_context* context, uint8_t port, uint64_t* speed) {
  return vs::R().query_port_speed != nullptr ? vs::R().query_port_speed(context, port, speed)
                                             : EOPNOTSUPP;
}
