// Python bindings of the native rules (for tests; the engine calls the rules directly).
#include <nanobind/nanobind.h>

#include "rules.hpp"

NB_MODULE(_rules, m) { m.doc() = "schedgym's built-in preemption rules, native"; }
