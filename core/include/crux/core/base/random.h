// A small, fully specified pseudo-random generator (SplitMix64) so that plans are bit-for-bit
// reproducible for a given seed on every platform and standard library (std::mt19937 is
// portable, but std::uniform_int_distribution and std::shuffle are not).
// Thread-compatible: one instance per thread.
#ifndef CRUX_CORE_BASE_RANDOM_H_
#define CRUX_CORE_BASE_RANDOM_H_

#include <cstdint>
#include <utility>
#include <vector>

namespace crux::core {

// The SplitMix64 finaliser: a good 64-bit mixing function, also used for ECMP hash modelling.
constexpr uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// 64-bit FNV-1a of a string: a stable name hash (independent of std::hash).
constexpr uint64_t StableHash(const char* s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(s[i]);
    h *= 0x100000001b3ULL;
  }
  return h;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform integer in [0, n). REQUIRES: n > 0. Uses rejection to avoid modulo bias.
  uint64_t Uniform(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do {
      x = Next();
    } while (x >= limit);
    return x % n;
  }

  // Uniform double in [0, 1).
  double UniformDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  // Fisher-Yates shuffle.
  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) {
      std::swap(v[i - 1], v[Uniform(i)]);
    }
  }

 private:
  uint64_t state_;
};

}  // namespace crux::core

#endif  // CRUX_CORE_BASE_RANDOM_H_
