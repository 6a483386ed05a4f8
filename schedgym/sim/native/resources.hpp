// schedgym/sim/resources.py in C++: the one fit tolerance and fit test, and the Python builtins the engine,
// the rules and the decision protocol reproduce operation by operation. One definition for the three of them,
// as the Python side has one module.
#pragma once

namespace schedgym {

// schedgym.sim.resources.EPS: the tolerance of the fit test.
constexpr double EPS = 1e-9;

// resources.covers(have, need): `have` is at least `need` in every resource, up to EPS.
inline bool covers(const double* have, const double* need) {
  return have[0] >= need[0] - EPS && have[1] >= need[1] - EPS && have[2] >= need[2] - EPS;
}
// covers((g, c, m), need), for sums kept in three locals.
inline bool covers3(double g, double c, double m, const double* need) {
  return g >= need[0] - EPS && c >= need[1] - EPS && m >= need[2] - EPS;
}

// Python's builtin max(a, b) and min(a, b): the first argument unless the second is strictly greater (less).
inline double py_max(double a, double b) { return (b > a) ? b : a; }
inline double py_min(double a, double b) { return (b < a) ? b : a; }
// Python's max(x, 0.0): x unless 0.0 > x.
inline double max0(double x) { return 0.0 > x ? 0.0 : x; }

// resources.shortfall(have, need): what `need` lacks beyond `have`, per resource (0 where it is covered).
inline void shortfall(const double* have, const double* need, double* out) {
  out[0] = max0(need[0] - have[0]);
  out[1] = max0(need[1] - have[1]);
  out[2] = max0(need[2] - have[2]);
}

}  // namespace schedgym
