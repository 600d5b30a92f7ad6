// Lock annotations checked by clang's -Wthread-safety (every clang build of Crux enables it, and
// the tsan preset makes it an error), plus the small annotated mutex they need: libstdc++'s
// std::mutex carries no capability attribute, so members guarded by one cannot be checked.
//
//   class Counter {
//    public:
//     void Add(int n) CRUX_EXCLUDES(mu_) {
//       crux::MutexLock lock(&mu_);
//       total_ += n;
//       cv_.NotifyAll();
//     }
//     void WaitAbove(int n) CRUX_EXCLUDES(mu_) {
//       crux::MutexLock lock(&mu_);
//       cv_.Wait(&mu_, [&]() CRUX_REQUIRES(mu_) { return total_ > n; });
//     }
//    private:
//     crux::Mutex mu_;
//     crux::CondVar cv_;
//     int total_ CRUX_GUARDED_BY(mu_) = 0;
//   };
//
// Rules of thumb: data shared between threads is CRUX_GUARDED_BY its mutex; private helpers that
// expect the lock held are CRUX_REQUIRES(mu_); public methods that take it are
// CRUX_EXCLUDES(mu_) (so a re-entrant call is a compile error, not a deadlock); lambdas that
// read guarded members under the lock (condition-variable predicates) are CRUX_REQUIRES(mu_).
// Data owned by one thread is not annotated: say so in a comment at the declaration.
//
// With GCC every macro expands to nothing and Mutex/CondVar are thin std:: wrappers.
// Lives in its own header-only component crux::sync (sync/CMakeLists.txt), not in core/, which
// has no threads; the threaded components (proto, client library, daemon, agent) link it.
#ifndef CRUX_SYNC_THREAD_ANNOTATIONS_H_
#define CRUX_SYNC_THREAD_ANNOTATIONS_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

#if defined(__clang__)
#define CRUX_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define CRUX_THREAD_ANNOTATION_(x)
#endif

#define CRUX_CAPABILITY(name) CRUX_THREAD_ANNOTATION_(capability(name))
#define CRUX_SCOPED_CAPABILITY CRUX_THREAD_ANNOTATION_(scoped_lockable)
#define CRUX_GUARDED_BY(x) CRUX_THREAD_ANNOTATION_(guarded_by(x))
#define CRUX_PT_GUARDED_BY(x) CRUX_THREAD_ANNOTATION_(pt_guarded_by(x))
#define CRUX_ACQUIRED_BEFORE(...) CRUX_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
#define CRUX_ACQUIRED_AFTER(...) CRUX_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))
#define CRUX_REQUIRES(...) CRUX_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define CRUX_REQUIRES_SHARED(...) CRUX_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))
#define CRUX_ACQUIRE(...) CRUX_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define CRUX_RELEASE(...) CRUX_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define CRUX_TRY_ACQUIRE(...) CRUX_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
#define CRUX_EXCLUDES(...) CRUX_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#define CRUX_ASSERT_CAPABILITY(x) CRUX_THREAD_ANNOTATION_(assert_capability(x))
#define CRUX_RETURN_CAPABILITY(x) CRUX_THREAD_ANNOTATION_(lock_returned(x))
// Last resort, with a comment saying why the analysis cannot follow the code.
#define CRUX_NO_THREAD_SAFETY_ANALYSIS CRUX_THREAD_ANNOTATION_(no_thread_safety_analysis)

namespace crux {

// A std::mutex the analysis knows about. Not recursive.
class CRUX_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() CRUX_ACQUIRE() { mu_.lock(); }
  void Unlock() CRUX_RELEASE() { mu_.unlock(); }
  bool TryLock() CRUX_TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds `mu` for its scope.
class CRUX_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) CRUX_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() CRUX_RELEASE() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* mu_;
};

// A condition variable used with a crux::Mutex. Every wait needs `mu` held and returns with it
// held; predicates run with it held (annotate predicate lambdas CRUX_REQUIRES(mu)).
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

  template <typename Predicate>
  void Wait(Mutex* mu, Predicate pred) CRUX_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock, pred);
    lock.release();  // Still held: ownership goes back to the caller's MutexLock.
  }
  // Returns pred() (false: the deadline passed first).
  template <typename Clock, typename Dur, typename Predicate>
  bool WaitUntil(Mutex* mu, const std::chrono::time_point<Clock, Dur>& deadline, Predicate pred)
      CRUX_REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    const bool ok = cv_.wait_until(lock, deadline, pred);
    lock.release();
    return ok;
  }
  template <typename Rep, typename Period, typename Predicate>
  bool WaitFor(Mutex* mu, const std::chrono::duration<Rep, Period>& timeout, Predicate pred)
      CRUX_REQUIRES(mu) {
    return WaitUntil(mu, std::chrono::steady_clock::now() + timeout, std::move(pred));
  }

 private:
  std::condition_variable cv_;
};

}  // namespace crux

#endif  // CRUX_SYNC_THREAD_ANNOTATIONS_H_
