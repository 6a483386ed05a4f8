// Python bindings of the native engine (nanobind).
#include <nanobind/nanobind.h>

#include "engine.hpp"

namespace nb = nanobind;

NB_MODULE(_engine, m) {
  m.doc() = "schedgym's native simulation engine";
  m.attr("ENGINE_VERSION") = schedgym::ENGINE_VERSION;
}
