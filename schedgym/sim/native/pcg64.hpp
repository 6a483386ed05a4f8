// numpy's PCG64 bit generator, and the numpy Generator draws that baselines/random_policy.py makes, draw for
// draw: Generator.random() and Generator.permutation(n).
//
// The Python rule draws from a numpy Generator; the native rule starts from that Generator's state
// (bit_generator.state) and hands its state back when it is done, so a run continues the Python stream exactly.
// Everything here mirrors numpy 2.x: numpy/random/src/pcg64/pcg64.h (the generator and its buffered 32-bit
// draws), numpy/random/src/distributions/distributions.c (random_interval) and numpy/random/_generator.pyx
// (permutation, shuffle). tests/test_native_random.py holds it to numpy on many seeds and states.
//
// Plain C++17 with the GCC/Clang 128-bit integer, no Python.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#if !defined(__SIZEOF_INT128__)
#error "pcg64.hpp needs the unsigned __int128 of GCC or Clang"
#endif

namespace schedgym {

__extension__ typedef unsigned __int128 uint128;  // __extension__: no -Wpedantic warning for the type

// What numpy's bit_generator.state holds: {"state": {"state": state, "inc": inc}, "has_uint32": has_uint32,
// "uinteger": uinteger}.
struct Pcg64State {
  uint128 state = 0;
  uint128 inc = 0;
  int has_uint32 = 0;  // nonzero: the high half of the last 64-bit draw waits to be the next 32-bit draw
  uint32_t uinteger = 0;
};

class Pcg64 {
 public:
  explicit Pcg64(const Pcg64State& s) : s_(s) {}

  const Pcg64State& state() const { return s_; }

  // pcg64_next64: one LCG step, then the XSL-RR output of the new state.
  uint64_t next_uint64() {
    static const uint128 multiplier = (static_cast<uint128>(0x2360ED051FC65DA4ULL) << 64) | 0x4385DF649FCCF645ULL;
    s_.state = s_.state * multiplier + s_.inc;
    const uint64_t high = static_cast<uint64_t>(s_.state >> 64);
    const uint64_t xored = high ^ static_cast<uint64_t>(s_.state);
    const unsigned rot = static_cast<unsigned>(high >> 58);
    return (xored >> rot) | (xored << ((-rot) & 63u));
  }

  // pcg64_next32: a 64-bit draw serves two 32-bit draws, the low half first.
  uint32_t next_uint32() {
    if (s_.has_uint32) {
      s_.has_uint32 = 0;
      return s_.uinteger;
    }
    const uint64_t next = next_uint64();
    s_.has_uint32 = 1;
    s_.uinteger = static_cast<uint32_t>(next >> 32);
    return static_cast<uint32_t>(next & 0xffffffffULL);
  }

  // Generator.random() (random_standard_uniform, pcg64's next_double): 53 high bits of a 64-bit draw.
  double next_double() { return static_cast<double>(next_uint64() >> 11) * (1.0 / 9007199254740992.0); }

  // random_interval(max): uniform in [0, max], by masked draws rejected above max; 32-bit draws while max
  // fits in 32 bits (so they use, and leave, the buffered half), 64-bit ones beyond.
  uint64_t interval(uint64_t max) {
    if (max == 0) return 0;
    uint64_t mask = max;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    mask |= mask >> 32;
    uint64_t value;
    if (max <= 0xffffffffULL) {
      while ((value = (next_uint32() & mask)) > max) {
      }
    } else {
      while ((value = (next_uint64() & mask)) > max) {
      }
    }
    return value;
  }

  // Generator.permutation(n): arange(n), then Generator.shuffle's Fisher-Yates pass (_shuffle_raw with
  // first = 1): for i from n - 1 down to 1, swap x[i] with x[random_interval(i)]. No draws for n < 2.
  void permutation(size_t n, std::vector<int>& out) {
    out.resize(n);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<int>(i);
    for (size_t i = n; i-- > 1;) {
      const size_t j = static_cast<size_t>(interval(i));
      const int tmp = out[j];
      out[j] = out[i];
      out[i] = tmp;
    }
  }

 private:
  Pcg64State s_;
};

}  // namespace schedgym
