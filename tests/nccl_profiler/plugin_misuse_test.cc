// libnccl-profiler-crux.so called the wrong way (issue #31 item 7: the plugin never crashes its
// host). The plugin is dlopened into the test process, as NCCL loads it, and every entry point of
// every exported table (v4, v5, v6) is called with NULL pointers, foreign or stale handles and
// contexts, inconsistent ranks, unknown event types and huge sizes. Each call returns an error
// code (kInvalidArgument) or ignores the event; nothing crashes. No crux-hostd: the plugin's
// socket path names a directory that does not exist, so nothing leaves the process.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "crux/nccl_profiler/abi.h"

namespace crux::nccl_profiler {
namespace {

constexpr const char* kPlugin = CRUX_NCCL_PROFILER_PLUGIN;
constexpr uint64_t kHash = 0x5eed00000000c0deull;

// What differs between the versions: the table's symbol, init's argument order, the descriptor.
struct V4 {
  using Table = abi::ProfilerV4;
  using Descr = abi::EventDescrV4;
  static constexpr const char* kSymbol = "ncclProfiler_v4";
  static abi::Result Init(const Table& t, void** ctx, int* mask, const char* name, int nnodes,
                          int nranks, int rank, abi::Logger log) {
    return t.init(ctx, mask, name, kHash, nnodes, nranks, rank, log);
  }
  static void SetType(Descr& d, uint64_t type) { d.type = static_cast<uint8_t>(type); }
};
struct V5 {
  using Table = abi::ProfilerV5;
  using Descr = abi::EventDescrV5;
  static constexpr const char* kSymbol = "ncclProfiler_v5";
  static abi::Result Init(const Table& t, void** ctx, int* mask, const char* name, int nnodes,
                          int nranks, int rank, abi::Logger log) {
    return t.init(ctx, kHash, mask, name, nnodes, nranks, rank, log);
  }
  static void SetType(Descr& d, uint64_t type) { d.type = type; }
};
struct V6 {
  using Table = abi::ProfilerV6;
  using Descr = abi::EventDescrV6;
  static constexpr const char* kSymbol = "ncclProfiler_v6";
  static abi::Result Init(const Table& t, void** ctx, int* mask, const char* name, int nnodes,
                          int nranks, int rank, abi::Logger log) {
    return t.init(ctx, kHash, mask, name, nnodes, nranks, rank, log);
  }
  static void SetType(Descr& d, uint64_t type) { d.type = type; }
};

// A pointer that is neither NULL nor anything the plugin handed out.
void* Foreign() {
  static int object = 0;
  return &object;
}
void* Number(uintptr_t n) { return reinterpret_cast<void*>(n); }

template <typename V>
class PluginMisuseTest : public ::testing::Test {
 protected:
  using Descr = typename V::Descr;

  void SetUp() override {
    // The environment the other tests of this binary set up is put back in TearDown.
    for (const char* name : kEnv) {
      const char* v = getenv(name);
      saved_.emplace_back(name, v != nullptr ? std::optional<std::string>(v) : std::nullopt);
    }
    // Read when the plugin's thread starts: a path that cannot exist, so no connection.
    setenv("CRUX_HOSTD_SOCKET", "/nonexistent-crux-test-dir/hostd.sock", 1);
    setenv("CRUX_NCCL_SAMPLE_EVERY_MS", "0", 1);
    unsetenv("CRUX_NCCL_PROFILER");
    lib_ = dlopen(kPlugin, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
    table_ = static_cast<const typename V::Table*>(dlsym(lib_, V::kSymbol));
    ASSERT_NE(table_, nullptr) << V::kSymbol;
  }
  void TearDown() override {
    if (lib_ != nullptr) dlclose(lib_);
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name, value->c_str(), 1);
      } else {
        unsetenv(name);
      }
    }
  }
  static constexpr const char* kEnv[] = {"CRUX_HOSTD_SOCKET", "CRUX_NCCL_SAMPLE_EVERY_MS",
                                         "CRUX_NCCL_PROFILER"};
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;

  abi::Result Init(void** ctx, int* mask, const char* name, int nnodes, int nranks, int rank,
                   abi::Logger log = nullptr) {
    return V::Init(*table_, ctx, mask, name, nnodes, nranks, rank, log);
  }
  // A communicator the test finalizes itself.
  void* Comm() {
    void* ctx = nullptr;
    EXPECT_EQ(Init(&ctx, &mask_, "misuse", 1, 4, 1), abi::kSuccess);
    EXPECT_NE(ctx, nullptr);
    return ctx;
  }
  abi::Result Start(void* ctx, void** h, Descr* d) { return table_->startEvent(ctx, h, d); }
  abi::Result Stop(void* h) { return table_->stopEvent(h); }
  abi::Result State(void* h, int state, abi::StateArgsV4* args) {
    return table_->recordEventState(h, static_cast<abi::EventState>(state), args);
  }
  abi::Result Finalize(void* ctx) { return table_->finalize(ctx); }

  static Descr Coll(const char* func = "AllReduce", size_t count = 1024, uint8_t channels = 2) {
    Descr d{};
    V::SetType(d, abi::kColl);
    d.coll.func = func;
    d.coll.datatype = "ncclFloat32";
    d.coll.count = count;
    d.coll.nChannels = channels;
    return d;
  }
  static Descr Of(uint64_t type, void* parent) {
    Descr d{};
    V::SetType(d, type);
    d.parentObj = parent;
    return d;
  }

  void* lib_ = nullptr;
  const typename V::Table* table_ = nullptr;
  int mask_ = 0;  // NCCL's process-wide activation mask (outlives every communicator here).
};

using Versions = ::testing::Types<V4, V5, V6>;
class VersionNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    if (std::is_same_v<T, V4>) return "v4";
    if (std::is_same_v<T, V5>) return "v5";
    return "v6";
  }
};
TYPED_TEST_SUITE(PluginMisuseTest, Versions, VersionNames);

TYPED_TEST(PluginMisuseTest, InitWithoutAContextPointerIsRefused) {
  int mask = 0;
  EXPECT_EQ(this->Init(nullptr, &mask, "c", 1, 2, 0), abi::kInvalidArgument);
  EXPECT_EQ(mask, 0);  // Refused before touching anything.
}

TYPED_TEST(PluginMisuseTest, InitWithInconsistentRanksIsRefused) {
  struct Case {
    int nranks;
    int rank;
  };
  for (const Case& c : std::vector<Case>{
           {0, 0}, {-1, 0}, {INT_MIN, 0}, {2, -1}, {2, 2}, {4, INT_MAX}, {(1 << 24) + 1, 0}}) {
    void* ctx = Foreign();
    EXPECT_EQ(this->Init(&ctx, &this->mask_, "c", 1, c.nranks, c.rank), abi::kInvalidArgument)
        << c.nranks << " ranks, rank " << c.rank;
    EXPECT_EQ(ctx, nullptr) << c.nranks << " ranks, rank " << c.rank;
  }
}

TYPED_TEST(PluginMisuseTest, InitWithoutMaskNameOrLoggerAndOddNodeCountsWorks) {
  std::vector<void*> comms;
  const std::string long_name(100000, 'n');
  for (int nnodes : {1, 0, -3, 9, INT_MAX}) {
    void* ctx = nullptr;
    EXPECT_EQ(this->Init(&ctx, nullptr, nullptr, nnodes, 8, 7), abi::kSuccess) << nnodes;
    EXPECT_NE(ctx, nullptr);
    comms.push_back(ctx);
  }
  void* named = nullptr;
  EXPECT_EQ(this->Init(&named, &this->mask_, long_name.c_str(), 1, 2, 0), abi::kSuccess);
  comms.push_back(named);
  for (void* ctx : comms) EXPECT_EQ(this->Finalize(ctx), abi::kSuccess);
}

TYPED_TEST(PluginMisuseTest, StartEventRefusesNullPointers) {
  void* ctx = this->Comm();
  auto coll = this->Coll();
  EXPECT_EQ(this->Start(ctx, nullptr, &coll), abi::kInvalidArgument);
  void* h = Foreign();
  EXPECT_EQ(this->Start(ctx, &h, nullptr), abi::kInvalidArgument);
  EXPECT_EQ(h, nullptr);
  h = Foreign();
  EXPECT_EQ(this->Start(nullptr, &h, &coll), abi::kInvalidArgument);
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(this->Start(nullptr, nullptr, nullptr), abi::kInvalidArgument);
  // The communicator still works.
  EXPECT_EQ(this->Start(ctx, &h, &coll), abi::kSuccess);
  EXPECT_NE(h, nullptr);
  EXPECT_EQ(this->Finalize(ctx), abi::kSuccess);
}

TYPED_TEST(PluginMisuseTest, StartEventIgnoresUnknownTypesForeignParentsAndHugeFields) {
  void* ctx = this->Comm();
  void* h = Foreign();
  // Unknown or combined type bits: ignored (NULL handle, so NCCL skips the follow-up calls).
  for (uint64_t type : {uint64_t{0}, uint64_t{3}, uint64_t{abi::kNetPlugin}, uint64_t{0xff},
                        uint64_t{1} << 40, ~uint64_t{0}}) {
    auto d = this->Of(type, Foreign());
    h = Foreign();
    EXPECT_EQ(this->Start(ctx, &h, &d), abi::kSuccess) << type;
    EXPECT_EQ(h, nullptr) << type;
  }
  // Collectives with no names, no or all channels, any count.
  for (auto d : {this->Coll(nullptr, 0, 0), this->Coll("AllReduce", SIZE_MAX, 255),
                 this->Coll("NotAFunction", SIZE_MAX / 3, 1)}) {
    d.coll.datatype = nullptr;
    EXPECT_EQ(this->Start(ctx, &h, &d), abi::kSuccess);
    EXPECT_NE(h, nullptr);
  }
  void* task = h;
  // P2p to peers outside the communicator.
  for (int peer : {-1, 4, INT_MAX, INT_MIN}) {
    auto d = this->Of(abi::kP2p, nullptr);
    d.p2p.func = "Send";
    d.p2p.count = SIZE_MAX;
    d.p2p.peer = peer;
    EXPECT_EQ(this->Start(ctx, &h, &d), abi::kSuccess) << peer;
  }
  // Children of parents that are not ours: the parent is never dereferenced.
  for (void* parent : {Foreign(), Number(1), Number(0x10), Number(UINTPTR_MAX), ctx}) {
    auto k = this->Of(abi::kKernelCh, parent);
    k.kernelCh.pTimer = UINT64_MAX;
    EXPECT_EQ(this->Start(ctx, &h, &k), abi::kSuccess);
    auto step = this->Of(abi::kProxyStep, parent);
    EXPECT_EQ(this->Start(ctx, &h, &step), abi::kSuccess);
    auto op = this->Of(abi::kProxyOp, parent);
    op.proxyOp.pid = ::getpid();
    op.proxyOp.peer = INT_MAX;
    op.proxyOp.isSend = 1;
    EXPECT_EQ(this->Start(ctx, &h, &op), abi::kSuccess);
  }
  // A GPU timer at the end of time on a real task.
  auto k = this->Of(abi::kKernelCh, task);
  k.kernelCh.pTimer = UINT64_MAX;
  EXPECT_EQ(this->Start(ctx, &h, &k), abi::kSuccess);
  abi::StateArgsV4 args{};
  args.kernelCh.pTimer = UINT64_MAX;
  EXPECT_EQ(this->State(h, abi::kKernelChStop, &args), abi::kSuccess);
  // Contexts that are not communicators: the events are dropped.
  auto coll = this->Coll();
  EXPECT_EQ(this->Start(Foreign(), &h, &coll), abi::kSuccess);
  EXPECT_EQ(this->Start(Number(0x1234567), &h, &coll), abi::kSuccess);
  EXPECT_EQ(this->Finalize(ctx), abi::kSuccess);
}

TYPED_TEST(PluginMisuseTest, StopEventRefusesNullAndIgnoresForeignHandles) {
  EXPECT_EQ(this->Stop(nullptr), abi::kInvalidArgument);
  void* ctx = this->Comm();
  for (void* h : {Foreign(), Number(1), Number(UINTPTR_MAX), ctx}) {
    EXPECT_EQ(this->Stop(h), abi::kSuccess);
  }
  EXPECT_EQ(this->Finalize(ctx), abi::kSuccess);
}

TYPED_TEST(PluginMisuseTest, RecordEventStateRefusesNullAndIgnoresForeignHandles) {
  abi::StateArgsV4 args{};
  args.proxyStep.transSize = SIZE_MAX;
  EXPECT_EQ(this->State(nullptr, abi::kKernelChStop, &args), abi::kInvalidArgument);
  EXPECT_EQ(this->State(nullptr, abi::kProxyStepSendWait, nullptr), abi::kInvalidArgument);
  void* ctx = this->Comm();
  auto coll = this->Coll();
  void* task = nullptr;
  ASSERT_EQ(this->Start(ctx, &task, &coll), abi::kSuccess);
  auto k = this->Of(abi::kKernelCh, task);
  void* kernel = nullptr;
  ASSERT_EQ(this->Start(ctx, &kernel, &k), abi::kSuccess);
  ASSERT_NE(kernel, nullptr);
  // The state needs its arguments.
  EXPECT_EQ(this->State(kernel, abi::kKernelChStop, nullptr), abi::kInvalidArgument);
  // States without arguments, or that Crux does not use, are ignored.
  for (int state : {-1, 0, 12345, INT_MIN}) {
    EXPECT_EQ(this->State(kernel, state, nullptr), abi::kSuccess) << state;
    EXPECT_EQ(this->State(kernel, state, &args), abi::kSuccess) << state;
  }
  for (void* h : {Foreign(), Number(1), Number(4), Number(UINTPTR_MAX), ctx, task}) {
    EXPECT_EQ(this->State(h, abi::kKernelChStop, &args), abi::kSuccess);
    EXPECT_EQ(this->State(h, abi::kProxyStepSendWait, &args), abi::kSuccess);
  }
  EXPECT_EQ(this->Finalize(ctx), abi::kSuccess);
}

TYPED_TEST(PluginMisuseTest, FinalizeRefusesNull) {
  EXPECT_EQ(this->Finalize(nullptr), abi::kInvalidArgument);
}

// A context the plugin never handed out: refused, and the live communicators are unaffected.
TYPED_TEST(PluginMisuseTest, FinalizeRefusesForeignContexts) {
  void* ctx = this->Comm();
  for (void* foreign : {Foreign(), Number(8), Number(0x1234567), Number(UINTPTR_MAX)}) {
    EXPECT_EQ(this->Finalize(foreign), abi::kInvalidArgument);
  }
  auto coll = this->Coll();
  void* h = nullptr;
  EXPECT_EQ(this->Start(ctx, &h, &coll), abi::kSuccess);
  EXPECT_EQ(this->Finalize(ctx), abi::kSuccess);
  // A later communicator (a new background thread) is not hurt by what was refused.
  void* next = this->Comm();
  EXPECT_EQ(this->Finalize(next), abi::kSuccess);
}

TYPED_TEST(PluginMisuseTest, FinalizeTwiceIsRefused) {
  void* a = this->Comm();
  void* b = this->Comm();
  EXPECT_EQ(this->Finalize(a), abi::kSuccess);
  EXPECT_EQ(this->Finalize(a), abi::kInvalidArgument);
  // `b` is still live; events on the finalized `a` are dropped.
  auto coll = this->Coll();
  void* h = nullptr;
  EXPECT_EQ(this->Start(b, &h, &coll), abi::kSuccess);
  EXPECT_NE(h, nullptr);
  EXPECT_EQ(this->Start(a, &h, &coll), abi::kSuccess);
  EXPECT_EQ(this->Finalize(b), abi::kSuccess);
  EXPECT_EQ(this->Finalize(b), abi::kInvalidArgument);
  // The next communicator starts a new background thread that would see anything left behind.
  void* c = this->Comm();
  EXPECT_EQ(this->Finalize(c), abi::kSuccess);
  EXPECT_EQ(this->Finalize(a), abi::kInvalidArgument);
}

// Two NCCL threads creating and destroying communicators at once: each last finalize joins the
// background thread while the other thread's init may start the next one. init and finalize are
// serialised, so two background threads never run together (ThreadSanitizer would see them share
// the Aggregator); every call still succeeds.
TYPED_TEST(PluginMisuseTest, ConcurrentInitAndFinalizeOfCommunicators) {
  auto churn = [this](int* failures) {
    for (int i = 0; i < 50; ++i) {
      void* ctx = nullptr;
      if (this->Init(&ctx, &this->mask_, "churn", 1, 2, i % 2) != abi::kSuccess) ++*failures;
      auto coll = this->Coll();
      void* h = nullptr;
      if (this->Start(ctx, &h, &coll) != abi::kSuccess) ++*failures;
      if (this->Finalize(ctx) != abi::kSuccess) ++*failures;
    }
  };
  int failures_a = 0;
  int failures_b = 0;
  std::thread a(churn, &failures_a);
  std::thread b(churn, &failures_b);
  a.join();
  b.join();
  EXPECT_EQ(failures_a, 0);
  EXPECT_EQ(failures_b, 0);
}

}  // namespace
}  // namespace crux::nccl_profiler
