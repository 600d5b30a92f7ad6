// A fake "real" libibverbs for the verbs shim tests (see fake_ibverbs.h). Exports the same
// versioned symbols as rdma-core (fake_ibverbs.map) so the shim binds it exactly as it binds the
// real one.
#include "fake_ibverbs.h"

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

std::mutex mu;
std::vector<fake_ibv_modify> modifies;
int live_qps = 0;
uint32_t next_qpn = 0x100;
ibv_device device;
ibv_context context;
ibv_pd pd;

void InitDevice() {
  static bool done = false;
  if (done) return;
  done = true;
  std::memset(&device, 0, sizeof device);
  std::strcpy(device.name, "mlx5_0");
  std::strcpy(device.dev_name, "uverbs0");
  std::memset(&context, 0, sizeof context);
  context.device = &device;
  std::memset(&pd, 0, sizeof pd);
  pd.context = &context;
}

}  // namespace

FAKE_EXPORT ibv_device** ibv_get_device_list(int* n) {
  std::lock_guard<std::mutex> lock(mu);
  InitDevice();
  auto** list = static_cast<ibv_device**>(std::calloc(2, sizeof(ibv_device*)));
  list[0] = &device;
  if (n != nullptr) *n = 1;
  return list;
}
FAKE_EXPORT void ibv_free_device_list(ibv_device** list) { std::free(list); }
FAKE_EXPORT const char* ibv_get_device_name(ibv_device* d) { return d->name; }
FAKE_EXPORT ibv_context* ibv_open_device(ibv_device*) { return &context; }
FAKE_EXPORT int ibv_close_device(ibv_context*) { return 0; }
FAKE_EXPORT int ibv_get_async_event(ibv_context*, ibv_async_event*) { return -1; }
FAKE_EXPORT void ibv_ack_async_event(ibv_async_event*) {}
FAKE_EXPORT int ibv_query_device(ibv_context*, ibv_device_attr* a) {
  std::memset(a, 0, sizeof *a);
  a->phys_port_cnt = 1;
  return 0;
}
// The IBVERBS_1.1 symbol takes rdma-core's compat struct, whose prefix is ibv_port_attr.
FAKE_EXPORT int ibv_query_port(ibv_context*, uint8_t, _compat_ibv_port_attr* compat) {
  auto* a = reinterpret_cast<ibv_port_attr*>(compat);
  std::memset(a, 0, sizeof *a);
  a->state = IBV_PORT_ACTIVE;
  a->link_layer = IBV_LINK_LAYER_ETHERNET;
  return 0;
}
FAKE_EXPORT int ibv_query_gid(ibv_context*, uint8_t, int, ibv_gid* gid) {
  std::memset(gid, 0, sizeof *gid);
  gid->raw[10] = 0xFF;
  gid->raw[11] = 0xFF;
  gid->raw[12] = 10;
  gid->raw[15] = 1;
  return 0;
}
FAKE_EXPORT int ibv_query_qp(ibv_qp*, ibv_qp_attr*, int, ibv_qp_init_attr*) { return 0; }
FAKE_EXPORT ibv_pd* ibv_alloc_pd(ibv_context*) { return &pd; }
FAKE_EXPORT int ibv_dealloc_pd(ibv_pd*) { return 0; }
FAKE_EXPORT ibv_mr* ibv_reg_mr(ibv_pd*, void*, size_t, int) { return nullptr; }
FAKE_EXPORT ibv_mr* ibv_reg_mr_iova2(ibv_pd*, void*, size_t, uint64_t, unsigned int) {
  return nullptr;
}
FAKE_EXPORT ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  return nullptr;
}
FAKE_EXPORT int ibv_dereg_mr(ibv_mr*) { return 0; }
FAKE_EXPORT ibv_cq* ibv_create_cq(ibv_context*, int, void*, ibv_comp_channel*, int) {
  return nullptr;
}
FAKE_EXPORT int ibv_destroy_cq(ibv_cq*) { return 0; }
FAKE_EXPORT ibv_qp* ibv_create_qp(ibv_pd* p, ibv_qp_init_attr* a) {
  std::lock_guard<std::mutex> lock(mu);
  auto* qp = static_cast<ibv_qp*>(std::calloc(1, sizeof(ibv_qp)));
  qp->context = p->context;
  qp->pd = p;
  qp->qp_num = next_qpn++;
  qp->qp_type = a->qp_type;
  qp->state = IBV_QPS_RESET;
  ++live_qps;
  return qp;
}
FAKE_EXPORT int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* a, int mask) {
  std::lock_guard<std::mutex> lock(mu);
  fake_ibv_modify m{};
  m.qpn = qp->qp_num;
  m.mask = mask;
  m.state = (mask & IBV_QP_STATE) ? a->qp_state : -1;
  m.flow_label = a->ah_attr.grh.flow_label;
  m.traffic_class = a->ah_attr.grh.traffic_class;
  m.is_global = a->ah_attr.is_global;
  std::memcpy(m.dgid, a->ah_attr.grh.dgid.raw, 16);
  m.dest_qpn = a->dest_qp_num;
  modifies.push_back(m);
  if (mask & IBV_QP_STATE) qp->state = a->qp_state;
  return 0;
}
FAKE_EXPORT int ibv_destroy_qp(ibv_qp* qp) {
  std::lock_guard<std::mutex> lock(mu);
  --live_qps;
  std::free(qp);
  return 0;
}
FAKE_EXPORT int ibv_fork_init() { return 0; }
FAKE_EXPORT const char* ibv_event_type_str(ibv_event_type) { return "fake event"; }
FAKE_EXPORT int ibv_query_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
FAKE_EXPORT int ibv_set_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }

FAKE_EXPORT int fake_ibv_modify_count(void) {
  std::lock_guard<std::mutex> lock(mu);
  return static_cast<int>(modifies.size());
}
FAKE_EXPORT int fake_ibv_modify_entry(int i, fake_ibv_modify* out) {
  std::lock_guard<std::mutex> lock(mu);
  if (i < 0 || i >= static_cast<int>(modifies.size())) return -1;
  *out = modifies[static_cast<size_t>(i)];
  return 0;
}
FAKE_EXPORT int fake_ibv_live_qps(void) {
  std::lock_guard<std::mutex> lock(mu);
  return live_qps;
}
