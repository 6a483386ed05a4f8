// A numpy Generator's PCG64 state in and out of C++ (pcg64.hpp), for the bindings of the random rule.
//
// The state travels as numpy's bit_generator.state dict; it is read from the Generator when a native rule is
// built and written back when the rule is done, so the Generator continues as if the Python rule had drawn
// from it. Only an exact numpy.random.Generator over an exact numpy.random.PCG64 is accepted: a subclass may
// draw differently. Anything else raises ValueError.
#pragma once

#include <nanobind/nanobind.h>

#include <climits>
#include <string>

#include "pcg64.hpp"

namespace schedgym {

namespace numpy_rng_detail {

namespace nb = nanobind;

[[noreturn]] inline void fail(const std::string& msg) { throw nb::value_error(msg.c_str()); }

// A Python int in [0, 2**128).
inline uint128 to_uint128(nb::handle h, const char* what) {
  if (!PyLong_Check(h.ptr()) || PyBool_Check(h.ptr())) fail(std::string("Expected ") + what + " to be an int");
  nb::int_ shift(64);
  nb::object high = nb::steal(PyNumber_Rshift(h.ptr(), shift.ptr()));
  if (!high.is_valid()) throw nb::python_error();
  const unsigned long long hi = PyLong_AsUnsignedLongLong(high.ptr());  // fails for < 0 and >= 2**128
  if (hi == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    fail(std::string("Expected ") + what + " in [0, 2**128)");
  }
  const unsigned long long lo = PyLong_AsUnsignedLongLongMask(h.ptr());
  return (static_cast<uint128>(hi) << 64) | lo;
}

inline nb::object from_uint128(uint128 x) {
  nb::object hi = nb::steal(PyLong_FromUnsignedLongLong(static_cast<unsigned long long>(x >> 64)));
  nb::object lo = nb::steal(PyLong_FromUnsignedLongLong(static_cast<unsigned long long>(x)));
  if (!hi.is_valid() || !lo.is_valid()) throw nb::python_error();
  nb::int_ shift(64);
  nb::object shifted = nb::steal(PyNumber_Lshift(hi.ptr(), shift.ptr()));
  if (!shifted.is_valid()) throw nb::python_error();
  nb::object out = nb::steal(PyNumber_Or(shifted.ptr(), lo.ptr()));
  if (!out.is_valid()) throw nb::python_error();
  return out;
}

// A Python int in [lo, hi] (as numpy's state setter converts has_uint32 to a C int, uinteger to a uint32).
inline long long to_int_in(nb::handle h, const char* what, long long lo, long long hi) {
  long long v = 0;
  if (PyBool_Check(h.ptr()) || !nb::try_cast<long long>(h, v, false) || v < lo || v > hi)
    fail(std::string("Expected ") + what + " to be an int in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

// rng.bit_generator, checked to be what the native draws reproduce.
inline nb::object pcg64_of(nb::handle rng) {
  nb::module_ random = nb::module_::import_("numpy.random");
  if (!rng.type().is(random.attr("Generator")))
    fail("Expected rng to be a numpy.random.Generator, got " + std::string(nb::repr(rng.type()).c_str()));
  nb::object bit_generator = rng.attr("bit_generator");
  if (!bit_generator.type().is(random.attr("PCG64")))
    fail("Expected rng to draw from numpy.random.PCG64, got " + std::string(nb::repr(bit_generator.type()).c_str()));
  return bit_generator;
}

}  // namespace numpy_rng_detail

// The state of the numpy Generator `rng` (numpy.random.Generator over numpy.random.PCG64, else ValueError).
inline Pcg64State pcg64_state(nanobind::handle rng) {
  namespace nb = nanobind;
  using namespace numpy_rng_detail;
  nb::object state = pcg64_of(rng).attr("state");
  nb::object inner = state["state"];
  Pcg64State s;
  s.state = to_uint128(inner["state"], "state['state']['state']");
  s.inc = to_uint128(inner["inc"], "state['state']['inc']");
  s.has_uint32 = static_cast<int>(to_int_in(state["has_uint32"], "state['has_uint32']", INT_MIN, INT_MAX));
  s.uinteger = static_cast<uint32_t>(to_int_in(state["uinteger"], "state['uinteger']", 0, 0xffffffffLL));
  return s;
}

// Set the numpy Generator `rng` (checked as by pcg64_state) to state `s`.
inline void set_pcg64_state(nanobind::handle rng, const Pcg64State& s) {
  namespace nb = nanobind;
  using namespace numpy_rng_detail;
  nb::object bit_generator = pcg64_of(rng);
  nb::dict inner;
  inner["state"] = from_uint128(s.state);
  inner["inc"] = from_uint128(s.inc);
  nb::dict state;
  state["bit_generator"] = "PCG64";
  state["state"] = inner;
  state["has_uint32"] = s.has_uint32;
  state["uinteger"] = s.uinteger;
  bit_generator.attr("state") = state;
}

}  // namespace schedgym
