// Python bindings of the native rules (for tests; the engine calls the rules directly).
//
// decide(rule, params, job, member, gang, avail, capacity, candidates) -> (nodes, victims)
// pcg64_draws(rng, draws) -> values (the random rule's generator, draw by draw)
//
// Every input is checked here (types, shapes, lengths, ranges, finite numbers): anything wrong raises
// ValueError, and nothing unchecked reaches the rules.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <climits>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "numpy_rng.hpp"
#include "rules.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

[[noreturn]] void fail(const std::string& msg) { throw nb::value_error(msg.c_str()); }

std::string show(nb::handle h) {
  try {
    return nb::cast<std::string>(nb::repr(h));
  } catch (...) {
    return "<object>";
  }
}

double to_double(nb::handle h, const std::string& what) {
  double v = 0.0;
  if (PyBool_Check(h.ptr()) || !nb::try_cast<double>(h, v))
    fail("Expected " + what + " to be a number, got " + show(h));
  if (!std::isfinite(v)) fail("Expected " + what + " to be finite, got " + show(h));
  return v;
}

int to_int(nb::handle h, const std::string& what, long long lo) {
  long long v = 0;
  if (PyBool_Check(h.ptr()) || !nb::try_cast<long long>(h, v))
    fail("Expected " + what + " to be an integer, got " + show(h));
  if (v < lo || v > INT_MAX)
    fail("Expected " + what + " in [" + std::to_string(lo) + ", " + std::to_string(INT_MAX) + "], got " +
         std::to_string(v));
  return static_cast<int>(v);
}

// The items of a sequence (a list, a tuple, a 1-D array; not a string or a mapping) of length `len`, unless
// len < 0.
std::vector<nb::object> items(nb::handle h, const std::string& what, long long len = -1) {
  PyObject* o = h.ptr();
  if (!PySequence_Check(o) || PyUnicode_Check(o) || PyBytes_Check(o) || PyByteArray_Check(o))
    fail("Expected " + what + " to be a list or tuple, got " + show(h));
  nb::object fast = nb::steal(PySequence_Fast(o, "a sequence"));
  if (!fast.is_valid()) {
    nb::python_error e;
    nb::raise_from(e, PyExc_ValueError, "Expected %s to be a list or tuple", what.c_str());
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast.ptr());
  if (len >= 0 && n != len)
    fail("Expected " + what + " to have " + std::to_string(len) + " items, got " + std::to_string(n));
  std::vector<nb::object> out;
  out.reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) out.push_back(nb::borrow(PySequence_Fast_GET_ITEM(fast.ptr(), i)));
  return out;
}

// `obj` as float64 values of shape (rows, 3), copied row-major (rows -1: any number of rows, stored in
// *n_rows; rows -2: shape (3,)). Numbers only, all finite.
std::vector<double> matrix(nb::handle obj, const char* what, long long rows, long long* n_rows) {
  nb::object arr;
  try {
    arr = nb::module_::import_("numpy").attr("ascontiguousarray")(obj, "dtype"_a = "float64");
  } catch (nb::python_error& e) {
    nb::raise_from(e, PyExc_ValueError, "Expected %s to be an array of numbers", what);
  }
  nb::ndarray<const double, nb::c_contig, nb::device::cpu> a;
  if (!nb::try_cast(arr, a, false)) fail(std::string("Expected ") + what + " to be an array of numbers");
  const bool vector = rows == -2;  // shape (3,)
  const bool bad_shape = vector ? (a.ndim() != 1 || a.shape(0) != 3)
                                : (a.ndim() != 2 || a.shape(1) != 3 ||
                                   (rows >= 0 && static_cast<long long>(a.shape(0)) != rows));
  if (bad_shape) {
    std::string shape = "(";
    for (size_t i = 0; i < a.ndim(); ++i) shape += (i ? ", " : "") + std::to_string(a.shape(i));
    shape += a.ndim() == 1 ? ",)" : ")";
    std::string want = vector ? "(3,)" : rows >= 0 ? "(" + std::to_string(rows) + ", 3)" : "(n_nodes, 3)";
    fail(std::string("Expected ") + what + " of shape " + want + ", got shape " + shape);
  }
  const size_t n = a.size();
  if (a.shape(0) > static_cast<size_t>(INT_MAX)) fail(std::string(what) + " has too many rows");
  std::vector<double> out(a.data(), a.data() + n);
  for (double v : out)
    if (!std::isfinite(v)) fail(std::string("Expected ") + what + " to be finite");
  if (n_rows) *n_rows = vector ? 1 : static_cast<long long>(a.shape(0));
  return out;
}

std::unique_ptr<schedgym::Rule> make_rule(nb::handle rule, nb::handle params) {
  std::string name;
  if (!nb::try_cast<std::string>(rule, name, false) || !nb::isinstance<nb::str>(rule))
    fail("Expected rule to be a string, got " + show(rule));
  if (name != "fitgpp" && name != "k8s" && name != "random")
    fail("Expected rule 'fitgpp', 'k8s' or 'random', got " + show(rule));
  if (!nb::isinstance<nb::dict>(params)) fail("Expected params to be a dict, got " + show(params));
  nb::dict p = nb::borrow<nb::dict>(params);
  for (auto [key, value] : p) {
    std::string k;
    if (!nb::isinstance<nb::str>(key) || !nb::try_cast<std::string>(key, k, false))
      fail("Expected the keys of params to be strings, got " + show(key));
    const bool known = (name == "fitgpp" && (k == "lam" || k == "grace_scale" || k == "order" || k == "rank")) ||
                       (name == "random" && k == "rng");
    if (!known) fail("Unknown parameter " + show(key) + " for rule " + show(rule));
  }
  if (name == "k8s") return schedgym::make_k8s();
  if (name == "random") {
    if (!p.contains("rng")) fail("Expected params {'rng': a numpy Generator} for rule 'random'");
    return std::make_unique<schedgym::RandomRule>(schedgym::pcg64_state(p["rng"]));
  }
  // Missing parameters take FitGpp's defaults.
  double lam = p.contains("lam") ? to_double(p["lam"], "lam") : 1.0;
  double grace_scale = p.contains("grace_scale") ? to_double(p["grace_scale"], "grace_scale") : 60.0;
  auto choice = [&p](const char* key, const char* a, const char* b) {
    if (!p.contains(key)) return false;
    nb::object h = p[key];
    std::string v;
    if (!nb::isinstance<nb::str>(h) || !nb::try_cast<std::string>(h, v, false) || (v != a && v != b))
      fail(std::string("Expected ") + key + " '" + a + "' or '" + b + "', got " + show(h));
    return v == b;
  };
  const bool order_grace = choice("order", "fit", "grace");
  const bool rank_grace = choice("rank", "score", "grace");
  if (!(lam >= 0)) fail("Expected lam >= 0, got " + show(p["lam"]));
  if (!(grace_scale > 0)) fail("Expected grace_scale > 0, got " + show(p["grace_scale"]));
  return schedgym::make_fitgpp(lam, grace_scale, order_grace, rank_grace);
}

nb::object int_tuple(const std::vector<int>& v) {
  nb::object out = nb::steal(PyTuple_New(static_cast<Py_ssize_t>(v.size())));
  if (!out.is_valid()) throw nb::python_error();
  for (size_t i = 0; i < v.size(); ++i) {
    PyObject* x = PyLong_FromLong(v[i]);
    if (!x) throw nb::python_error();
    PyTuple_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(i), x);
  }
  return out;
}

nb::tuple decide(nb::handle rule, nb::handle params, nb::handle job, nb::handle member, nb::handle gang,
                 nb::handle avail, nb::handle capacity, nb::handle candidates) {
  std::unique_ptr<schedgym::Rule> r = make_rule(rule, params);
  schedgym::RequestView view;
  view.job = to_int(job, "job", 0);
  std::vector<double> m = matrix(member, "member", -2, nullptr);
  std::copy(m.begin(), m.end(), view.member);
  view.gang = to_int(gang, "gang", 1);
  long long n_nodes = 0;
  std::vector<double> av = matrix(avail, "avail", -1, &n_nodes);
  std::vector<double> cap = matrix(capacity, "capacity", n_nodes, nullptr);
  view.n_nodes = static_cast<int>(n_nodes);
  view.avail = av.data();
  view.capacity = cap.data();
  int last_node = -1;
  for (const nb::object& entry : items(candidates, "candidates")) {
    std::vector<nb::object> pair = items(entry, "each item of candidates", 2);
    const int node = to_int(pair[0], "a candidate node", 0);
    if (node >= n_nodes)
      fail("Candidate node " + std::to_string(node) + " is not a node index (" + std::to_string(n_nodes) + " nodes)");
    if (node <= last_node) fail("Expected candidate nodes in ascending order without repeats");
    last_node = node;
    std::vector<schedgym::Candidate> cands;
    const std::string where = " (node " + std::to_string(node) + ")";
    int last_idx = -1;
    for (const nb::object& item : items(pair[1], "the candidates of a node" + where)) {
      std::vector<nb::object> f = items(item, "a candidate" + where, 5);
      schedgym::Candidate c;
      c.idx = to_int(f[0], "a candidate's idx" + where, 0);
      if (c.idx <= last_idx) fail("Expected the candidates of a node by ascending idx without repeats" + where);
      last_idx = c.idx;
      std::vector<nb::object> d = items(f[1], "a candidate's demand" + where, 3);
      for (int i = 0; i < 3; ++i) c.demand[i] = to_double(d[i], "a candidate's demand" + where);
      c.gang = to_int(f[2], "a candidate's gang" + where, 1);
      c.grace = to_double(f[3], "a candidate's grace" + where);
      c.run_start = to_double(f[4], "a candidate's run_start" + where);
      cands.push_back(c);
    }
    view.candidates.emplace_back(node, std::move(cands));
  }
  schedgym::Plan plan = r->decide(view);
  if (auto* random = dynamic_cast<schedgym::RandomRule*>(r.get()))  // the Generator moves on as in Python
    schedgym::set_pcg64_state(nb::borrow<nb::dict>(params)["rng"], random->rng().state());
  return nb::make_tuple(int_tuple(plan.nodes), int_tuple(plan.victims));
}

// The draws the random rule makes, from the numpy Generator `rng` (which then stands where they leave it),
// for comparing with numpy's own: each item of `draws` is ("random",) for Generator.random(),
// ("permutation", n) for Generator.permutation(n) (a tuple), or, for the parts of those, ("uint64",),
// ("uint32",) (the buffered 32-bit draw) and ("interval", max) (numpy's random_interval).
nb::list pcg64_draws(nb::handle rng, nb::handle draws) {
  schedgym::Pcg64 gen(schedgym::pcg64_state(rng));
  nb::list out;
  std::vector<int> perm;
  for (const nb::object& item : items(draws, "draws")) {
    std::vector<nb::object> d = items(item, "a draw");
    std::string kind;
    if (d.empty() || !nb::try_cast<std::string>(d[0], kind, false)) fail("Expected a draw to start with its kind");
    const size_t n_args = kind == "permutation" || kind == "interval" ? 2 : 1;
    if (d.size() != n_args) fail("Expected " + std::to_string(n_args) + " items in draw " + show(item));
    if (kind == "random") {
      out.append(gen.next_double());
    } else if (kind == "uint64") {
      out.append(gen.next_uint64());
    } else if (kind == "uint32") {
      out.append(gen.next_uint32());
    } else if (kind == "permutation") {
      gen.permutation(static_cast<size_t>(to_int(d[1], "a permutation's size", 0)), perm);
      out.append(int_tuple(perm));
    } else if (kind == "interval") {
      unsigned long long max = 0;
      if (PyBool_Check(d[1].ptr()) || !nb::try_cast<unsigned long long>(d[1], max, false))
        fail("Expected an interval's max in [0, 2**64), got " + show(d[1]));
      out.append(gen.interval(max));
    } else {
      fail("Unknown draw " + show(item));
    }
  }
  schedgym::set_pcg64_state(rng, gen.state());
  return out;
}

}  // namespace

NB_MODULE(_rules, m) {
  m.doc() = "schedgym's built-in preemption rules, native";
  m.def("decide", &decide, "rule"_a.none(), "params"_a.none(), "job"_a.none(), "member"_a.none(), "gang"_a.none(),
        "avail"_a.none(), "capacity"_a.none(), "candidates"_a.none(),
        "decide(rule, params, job, member, gang, avail, capacity, candidates) -> (nodes, victims)\n\n"
        "The plan of the native rule ``rule`` (\"fitgpp\" with params lam, grace_scale, order, rank, or \"k8s\"\n"
        "with none) for one preemption request: member (3,) is the job's per-node demand, avail and capacity\n"
        "are (n_nodes, 3), candidates is [(node, [(idx, (gpus, cpus, mem_gb), gang, grace, run_start), ...]), ...]\n"
        "with nodes ascending and candidates by idx. An empty plan ((), ()) declines. Bad input: ValueError.\n\n"
        "\"random\" takes params {\"rng\": a numpy Generator over PCG64}: it draws from it as the Python rule\n"
        "would, and leaves it where the Python rule would.");
  m.def("pcg64_draws", &pcg64_draws, "rng"_a, "draws"_a,
        "pcg64_draws(rng, draws) -> values\n\n"
        "The random rule's draws from the numpy Generator rng (over PCG64), which then stands where they leave\n"
        "it: (\"random\",), (\"permutation\", n), (\"uint64\",), (\"uint32\",) or (\"interval\", max) each.");
}
