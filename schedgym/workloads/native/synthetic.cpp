// schedgym.workloads._synthetic: the synthetic generator's draws and arithmetic (generate() in
// schedgym/workloads/synthetic.py, the specification) in C++, without the GIL.
//
// The draws are numpy's own: the caller's Generator hands over its bit generator (bit_generator.capsule, a
// bitgen_t) and every distribution is the function of numpy's libnpyrandom that the Generator method calls
// (Generator.random fills with random_standard_uniform_fill, lognormal and exponential call random_lognormal
// and random_exponential once per element), so the same state gives the same numbers and leaves the same
// state. The arithmetic after them is numpy's, operation for operation: np.where, np.maximum/np.minimum with
// their NaN rules, np.round (rint, and for 3 decimals x * 1000, rint, / 1000 as PyArray_Round does),
// np.ceil, a sequential cumsum and the pairwise sum behind ndarray.mean. tests/test_synthetic_native.py
// holds it to generate()'s Python path, column by column and bit by bit, and compares the Generator's state
// after both.
//
// The caller holds bit_generator.lock, as numpy's methods do, and passes only parameters for which none of
// this arithmetic can overflow or produce a NaN (numpy would report those as warnings; see
// _native_arguments in synthetic.py).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/tuple.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "numpy/random/bitgen.h"
#include "numpy/random/distributions.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// Bumped with any change of the arguments or of the draws; synthetic.py uses a module of its own version only.
constexpr int SYNTHETIC_VERSION = 2;

using F64In = nb::ndarray<const double, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using F64Out = nb::ndarray<double, nb::c_contig, nb::device::cpu>;
using I64Out = nb::ndarray<int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// (log of the median, sigma, min, max) of a clipped lognormal.
using Lognormal = std::array<double, 4>;
// A discrete distribution: its values and the normalised cumulative distribution Generator.choice searches.
using Discrete = std::pair<F64In, F64In>;

bitgen_t* bit_generator(nb::handle capsule) {
  void* p = PyCapsule_GetPointer(capsule.ptr(), "BitGenerator");
  if (p == nullptr) throw nb::python_error();  // not a numpy bit generator's capsule: PyCapsule_GetPointer said why
  return static_cast<bitgen_t*>(p);
}

// np.maximum and np.minimum: a NaN in either argument is the result.
inline double np_maximum(double a, double b) { return (a >= b || std::isnan(a)) ? a : b; }
inline double np_minimum(double a, double b) { return (a <= b || std::isnan(a)) ? a : b; }

// np.minimum(np.maximum(rng.lognormal(mean, sigma), lo), hi) for one draw.
inline double clipped_lognormal(bitgen_t* bg, const Lognormal& d) {
  return np_minimum(np_maximum(random_lognormal(bg, d[0], d[1]), d[2]), d[3]);
}

// values[np.searchsorted(cdf, u, side="right")]: the first value whose cumulative probability exceeds u. The
// cdf is sorted, so that index is the number of its entries <= u: counted without branches for the few values
// of a usual distribution (a binary search mispredicts on random u).
inline double pick(const Discrete& dist, double u) {
  const double* cdf = dist.second.data();
  const size_t k = dist.second.shape(0);
  if (k > 16) return dist.first.data()[std::upper_bound(cdf, cdf + k, u) - cdf];
  size_t index = 0;
  for (size_t j = 0; j < k; ++j) index += cdf[j] <= u;
  return dist.first.data()[index];
}

void check_discrete(const Discrete& dist, const char* name) {
  if (dist.first.shape(0) == 0 || dist.first.shape(0) != dist.second.shape(0))
    throw std::invalid_argument(std::string("Expected ") + name + " as values and cdf of one non-empty length");
  // pick() counts the entries <= u, which is searchsorted's index only in a sorted cdf, and stays inside the
  // values (u < 1) only if the cdf ends at 1.
  const double* cdf = dist.second.data();
  const size_t k = dist.second.shape(0);
  if (!std::is_sorted(cdf, cdf + k) || cdf[k - 1] != 1.0)
    throw std::invalid_argument(std::string("Expected the cdf of ") + name + " to be sorted and end at 1.0");
}

// numpy's pairwise summation (pairwise_sum in numpy/_core/src/umath/loops_utils.h.src), which ndarray.sum and
// ndarray.mean use on a contiguous float64 array: blocks of at most 128 summed with 8 accumulators, halves
// split at a multiple of 8.
double pairwise_sum(const double* a, size_t n) {
  if (n < 8) {
    double res = -0.0;
    for (size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int k = 0; k < 8; ++k) r[k] = a[k];
    size_t i = 8;
    for (; i < n - (n % 8); i += 8)
      for (int k = 0; k < 8; ++k) r[k] += a[i + k];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

// The smallest and largest of n values as numpy's min and max find them (a NaN among them is both).
std::pair<double, double> extremes(const double* x, size_t n) {
  double lo = x[0], hi = x[0];
  for (size_t i = 1; i < n; ++i) {
    lo = np_minimum(lo, x[i]);
    hi = np_maximum(hi, x[i]);
  }
  return {lo, hi};
}

// float((gpus * dur).mean()), then the extremes JobTable checks first (schedgym.sim.job._extremes): the
// smallest and largest duration, gpus, cpus, mem_gb and grace, the smallest gpus + cpus + mem_gb, and the
// smallest and largest gang size and class.
using JobsResult = std::tuple<double, std::array<double, 5>, std::array<double, 5>, double, int64_t, int64_t,
                              int64_t, int64_t>;

// Everything generate() draws before the arrivals, into floats (rows: submit (left for draw_submit),
// duration, gpus, cpus, mem_gb, grace), gang, job_class and member (n, 3: gpus, cpus and mem_gb / gang, the
// per-node demands of JobTable's columns).
JobsResult draw_jobs(nb::handle capsule, double te_fraction, const Lognormal& te_duration,
                     const Lognormal& be_duration, const Discrete& te_gpus, const Discrete& be_gpus,
                     const Discrete& cpus_per_gpu, const Discrete& mem_per_gpu, const Lognormal& grace_dist,
                     double te_grace, double gpus_per_node, F64Out floats, I64Out gang, I64Out job_class,
                     F64Out member) {
  bitgen_t* bg = bit_generator(capsule);
  check_discrete(te_gpus, "te_gpus");
  check_discrete(be_gpus, "be_gpus");
  check_discrete(cpus_per_gpu, "cpus_per_gpu");
  check_discrete(mem_per_gpu, "mem_per_gpu");
  if (floats.ndim() != 2 || floats.shape(0) != 6) throw std::invalid_argument("Expected floats of shape (6, n_jobs)");
  const size_t n = floats.shape(1);
  if (n == 0 || gang.shape(0) != n || job_class.shape(0) != n)
    throw std::invalid_argument("Expected n_jobs >= 1 and gang and job_class of length n_jobs");
  if (member.ndim() != 2 || member.shape(0) != n || member.shape(1) != 3)
    throw std::invalid_argument("Expected member of shape (n_jobs, 3)");
  double* per_node = member.data();
  double* dur = floats.data() + n;
  double* gpus = dur + n;
  double* cpus = gpus + n;
  double* mem = cpus + n;
  double* grace = mem + n;
  int64_t* cls = job_class.data();
  int64_t* nodes = gang.data();
  {
    nb::gil_scoped_release release;
    std::vector<double> u(n);
    std::vector<char> te(n);

    // is_te = rng.random(n) < te_fraction
    random_standard_uniform_fill(bg, static_cast<npy_intp>(n), u.data());
    for (size_t i = 0; i < n; ++i) {
      te[i] = u[i] < te_fraction;
      cls[i] = te[i] ? 0 : 1;  // JobClass.TE, JobClass.BE
    }
    // dur = np.round(np.where(is_te, <TE lognormal>, <BE lognormal>)): all TE draws, then all BE draws.
    for (size_t i = 0; i < n; ++i) dur[i] = clipped_lognormal(bg, te_duration);
    for (size_t i = 0; i < n; ++i) {
      const double be = clipped_lognormal(bg, be_duration);
      dur[i] = std::nearbyint(te[i] ? dur[i] : be);
    }
    // gpus = np.where(is_te, _draw(te_gpus), _draw(be_gpus)); cpus and mem_gb: gpus times a draw.
    random_standard_uniform_fill(bg, static_cast<npy_intp>(n), u.data());
    for (size_t i = 0; i < n; ++i) gpus[i] = pick(te_gpus, u[i]);
    random_standard_uniform_fill(bg, static_cast<npy_intp>(n), u.data());
    for (size_t i = 0; i < n; ++i)
      if (!te[i]) gpus[i] = pick(be_gpus, u[i]);
    random_standard_uniform_fill(bg, static_cast<npy_intp>(n), u.data());
    for (size_t i = 0; i < n; ++i) cpus[i] = gpus[i] * pick(cpus_per_gpu, u[i]);
    random_standard_uniform_fill(bg, static_cast<npy_intp>(n), u.data());
    for (size_t i = 0; i < n; ++i) mem[i] = gpus[i] * pick(mem_per_gpu, u[i]);
    // grace = np.where(is_te, te_grace, np.round(<lognormal>))
    for (size_t i = 0; i < n; ++i) {
      const double g = std::nearbyint(clipped_lognormal(bg, grace_dist));
      grace[i] = te[i] ? te_grace : g;
    }
    // nodes = np.maximum(1, np.ceil(gpus / gpus_per_node)).astype(np.int64); the caller has checked that the
    // largest quotient fits an int64.
    for (size_t i = 0; i < n; ++i) nodes[i] = static_cast<int64_t>(np_maximum(1.0, std::ceil(gpus[i] / gpus_per_node)));
    // (floats[2:5] / gang).T: the int64 gang size as a double, as numpy divides by it.
    for (size_t i = 0; i < n; ++i) {
      const double k = static_cast<double>(nodes[i]);
      per_node[3 * i] = gpus[i] / k;
      per_node[3 * i + 1] = cpus[i] / k;
      per_node[3 * i + 2] = mem[i] / k;
    }
    JobsResult out;
    auto& [mean, lo, hi, total_min, gang_min, gang_max, cls_min, cls_max] = out;
    // float((gpus * dur).mean()): numpy's add.reduce starts from its identity, 0.0, and adds the pairwise sum
    // of the whole array; mean divides by the count.
    for (size_t i = 0; i < n; ++i) u[i] = gpus[i] * dur[i];
    mean = (0.0 + pairwise_sum(u.data(), n)) / static_cast<double>(n);
    for (int r = 0; r < 5; ++r) std::tie(lo[r], hi[r]) = extremes(dur + r * n, n);
    for (size_t i = 0; i < n; ++i) u[i] = gpus[i] + cpus[i] + mem[i];  // (g + c) + m, as numpy adds them
    total_min = extremes(u.data(), n).first;
    const auto gangs = std::minmax_element(nodes, nodes + n);
    gang_min = *gangs.first;
    gang_max = *gangs.second;
    const auto classes = std::minmax_element(cls, cls + n);
    cls_min = *classes.first;
    cls_max = *classes.second;
    return out;
  }
}

// submit = np.round(np.cumsum(rng.exponential(scale, size=n)), 3), into submit (n,); returns its smallest and
// largest value.
std::pair<double, double> draw_submit(nb::handle capsule, double scale, F64Out submit) {
  bitgen_t* bg = bit_generator(capsule);
  if (submit.ndim() != 1 || submit.shape(0) == 0) throw std::invalid_argument("Expected submit of shape (n_jobs,)");
  const size_t n = submit.shape(0);
  double* s = submit.data();
  nb::gil_scoped_release release;
  for (size_t i = 0; i < n; ++i) s[i] = random_exponential(bg, scale);
  for (size_t i = 1; i < n; ++i) s[i] = s[i - 1] + s[i];  // add.accumulate: one running sum, in order
  // np.round(x, 3) is PyArray_Round: multiply by 10.0**3, rint, divide by it.
  for (size_t i = 0; i < n; ++i) s[i] = std::nearbyint(s[i] * 1000.0) / 1000.0;
  return extremes(s, n);
}

}  // namespace

NB_MODULE(_synthetic, m) {
  m.doc() = "The synthetic generator's draws in C++ (schedgym/workloads/native/synthetic.cpp).";
  m.attr("SYNTHETIC_VERSION") = SYNTHETIC_VERSION;
  // numpy's distributions are compiled into this module: they are those of the numpy it was built against.
  m.attr("NUMPY_VERSION") = SCHEDGYM_NUMPY_VERSION;
  m.def("draw_jobs", &draw_jobs, "capsule"_a, "te_fraction"_a, "te_duration"_a, "be_duration"_a, "te_gpus"_a,
        "be_gpus"_a, "cpus_per_gpu"_a, "mem_per_gpu"_a, "grace"_a, "te_grace"_a, "gpus_per_node"_a, "floats"_a,
        "gang"_a, "job_class"_a, "member"_a,
        "Everything synthetic.generate draws before the arrivals, from the bit generator behind capsule (the "
        "caller holds its lock), into floats (rows duration to grace of a JobTable's float columns), gang, "
        "job_class and member (per-node demands). Returns the mean of gpus * duration; the smallest and the "
        "largest duration, gpus, cpus, mem_gb and grace; the smallest gpus + cpus + mem_gb; the smallest and "
        "largest gang size and class. Releases the GIL.");
  m.def("draw_submit", &draw_submit, "capsule"_a, "scale"_a, "submit"_a,
        "The arrivals of synthetic.generate: np.round(np.cumsum(rng.exponential(scale, n)), 3), into submit; "
        "returns their smallest and largest. Releases the GIL.");
}
