// Python bindings of the native engine (nanobind): schedgym.sim._engine.Engine.
//
// Arrays come in as numpy arrays (converted to C-contiguous float64/int64 if they are not) and go out as
// fresh numpy arrays (copies). advance() and run_declining() release the GIL; a mutex per engine keeps a
// second thread from reading or driving the engine while they run.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "batch.hpp"
#include "decision.hpp"
#include "engine.hpp"
#include "numpy_rng.hpp"
#include "plan_core.hpp"
#include "rules.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using schedgym::Engine;
using schedgym::EnvCore;

namespace {

using F64In = nb::ndarray<const double, nb::c_contig, nb::device::cpu>;
using I64In = nb::ndarray<const int64_t, nb::c_contig, nb::device::cpu>;

// The bound object: the engine, the lock that guards it, and the job ids that error messages name.
struct PyEngine {
  std::unique_ptr<Engine> engine;
  std::mutex mu;
  nb::object job_ids;  // a sequence of str, or None
};

// A fresh numpy array holding a copy of n x cols values (cols == 0: one dimension).
template <typename T, typename Src>
nb::ndarray<nb::numpy, T> to_numpy(const Src* data, size_t n, size_t cols = 0) {
  size_t count = n * (cols ? cols : 1);
  T* buf = new T[count ? count : 1];
  std::copy(data, data + count, buf);
  nb::capsule owner(buf, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  size_t shape[2] = {n, cols};
  return nb::ndarray<nb::numpy, T>(buf, cols ? 2 : 1, shape, owner);
}

template <typename T>
nb::ndarray<nb::numpy, T> per_job(PyEngine& s, const std::vector<T>& (Engine::*getter)() const) {
  std::lock_guard<std::mutex> lock(s.mu);
  const std::vector<T>& v = ((*s.engine).*getter)();
  return to_numpy<T>(v.data(), v.size());
}

// The rule of a policy that never preempts.
class DeclineRule final : public schedgym::Rule {
 public:
  schedgym::Plan decide(const schedgym::RequestView&) override { return {}; }
};

// A built-in rule by name, with the parameters of its Python class (baselines/fitgpp.py, baselines/k8s.py,
// baselines/random_policy.py).
std::unique_ptr<schedgym::Rule> make_rule(const std::string& name, nb::dict params) {
  auto get = [&](const char* key, nb::object fallback) -> nb::object {
    return params.contains(key) ? nb::object(params[key]) : fallback;
  };
  if (name == "decline") {  // answers every request with the empty plan (Simulator.run_until with a non-preemptive policy)
    if (nb::len(params) != 0) throw std::invalid_argument("decline takes no parameters");
    return std::make_unique<DeclineRule>();
  }
  if (name == "k8s") {
    if (nb::len(params) != 0) throw std::invalid_argument("k8s takes no parameters");
    return schedgym::make_k8s();
  }
  if (name == "random") {
    if (nb::len(params) != 1 || !params.contains("rng")) throw std::invalid_argument("random takes exactly 'rng'");
    return std::make_unique<schedgym::RandomRule>(schedgym::pcg64_state(params["rng"]));
  }
  if (name == "fitgpp") {
    for (auto item : params) {
      std::string key = nb::cast<std::string>(item.first);
      if (key != "lam" && key != "grace_scale" && key != "order" && key != "rank")
        throw std::invalid_argument("Unknown fitgpp parameter '" + key + "'");
    }
    double lam = nb::cast<double>(get("lam", nb::float_(1.0)));
    double grace_scale = nb::cast<double>(get("grace_scale", nb::float_(60.0)));
    std::string order = nb::cast<std::string>(get("order", nb::str("fit")));
    std::string rank = nb::cast<std::string>(get("rank", nb::str("score")));
    if (order != "fit" && order != "grace") throw std::invalid_argument("Expected order 'fit' or 'grace'");
    if (rank != "score" && rank != "grace") throw std::invalid_argument("Expected rank 'score' or 'grace'");
    return schedgym::make_fitgpp(lam, grace_scale, order == "grace", rank == "grace");
  }
  throw std::invalid_argument("Unknown native rule '" + name + "'; expected 'fitgpp', 'k8s', 'random' or 'decline'");
}

void check_1d(const char* name, size_t ndim, size_t len, size_t n_jobs) {
  if (ndim != 1 || len != n_jobs)
    throw std::invalid_argument(std::string("Expected ") + name + " to have shape (" + std::to_string(n_jobs) +
                                ",) like submit, got " + (ndim == 1 ? "length " + std::to_string(len)
                                                                    : std::to_string(ndim) + " dimensions"));
}

// Error messages name a job as the Python engine does, by repr(job_id) (job_ids: a sequence of str, or None).
// The label refers to `self`, which owns the engine (a copied engine is labelled anew).
void label_jobs(PyEngine* self, nb::object job_ids) {
  self->job_ids = job_ids;
  if (job_ids.is_none()) return;
  // Called from resolve(), with the GIL.
  self->engine->job_label = [self](int i) {
    return std::string(nb::repr(self->job_ids[nb::int_(i)]).c_str());
  };
}

void init_engine(PyEngine* self, F64In capacity, F64In submit, F64In duration, F64In member, I64In gang,
                 I64In job_class, F64In grace, bool priority_queue, bool backfill, bool first_fit,
                 int64_t max_preemptions, double restart_overhead, bool preemption, nb::object job_ids,
                 std::optional<F64In> restart) {
  if (capacity.ndim() != 2 || capacity.shape(1) != 3)
    throw std::invalid_argument("Expected capacity to have shape (n_nodes, 3)");
  if (submit.ndim() != 1) throw std::invalid_argument("Expected submit to be one-dimensional");
  size_t n_jobs = submit.shape(0);
  if (member.ndim() != 2 || member.shape(1) != 3 || member.shape(0) != n_jobs)
    throw std::invalid_argument("Expected member to have shape (" + std::to_string(n_jobs) + ", 3) like submit");
  check_1d("duration", duration.ndim(), duration.shape(0), n_jobs);
  check_1d("gang", gang.ndim(), gang.shape(0), n_jobs);
  check_1d("job_class", job_class.ndim(), job_class.shape(0), n_jobs);
  check_1d("grace", grace.ndim(), grace.shape(0), n_jobs);
  if (restart) check_1d("restart", restart->ndim(), restart->shape(0), n_jobs);
  if (n_jobs > static_cast<size_t>(INT32_MAX) / 4 || capacity.shape(0) > static_cast<size_t>(INT32_MAX) / 4)
    throw std::invalid_argument("Too many jobs or nodes");
  if (!job_ids.is_none() && nb::len(job_ids) != n_jobs)
    throw std::invalid_argument("Expected job_ids to have one id per job");
  schedgym::EngineConfig config;
  config.priority_queue = priority_queue;
  config.backfill = backfill;
  config.first_fit = first_fit;
  config.max_preemptions = max_preemptions;
  config.restart_overhead = restart_overhead;
  config.preemption = preemption;
  auto engine = std::make_unique<Engine>(static_cast<int>(capacity.shape(0)), capacity.data(),
                                         static_cast<int>(n_jobs), submit.data(), duration.data(), member.data(),
                                         gang.data(), job_class.data(), grace.data(), config,
                                         restart ? restart->data() : nullptr);
  new (self) PyEngine();
  self->engine = std::move(engine);
  label_jobs(self, job_ids);
}

// Engine.clone(): an independent engine in the same state (the C++ copy constructor), naming jobs alike.
PyEngine* clone_engine(PyEngine& s) {
  std::unique_ptr<Engine> copy;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    copy = std::make_unique<Engine>(*s.engine);
  }
  auto* out = new PyEngine();
  out->engine = std::move(copy);
  label_jobs(out, s.job_ids);
  return out;
}

// A rule that records the plans it makes (in the order the engine resolves them), so that a run of it can be
// replayed decision by decision.
class LoggingRule final : public schedgym::Rule {
 public:
  explicit LoggingRule(schedgym::Rule& inner) : inner_(inner) {}
  schedgym::Plan decide(const schedgym::RequestView& r) override {
    plans.push_back(inner_.decide(r));
    return plans.back();
  }
  std::vector<schedgym::Plan> plans;

 private:
  schedgym::Rule& inner_;
};

// The bound decision core (schedgym.sim._engine.EnvCore): the engine object it drives (kept alive, and its
// lock taken around every call) and the core itself.
struct PyEnvCore {
  nb::object engine_obj;
  PyEngine* engine = nullptr;
  std::unique_ptr<EnvCore> core;
};

using F32Out = nb::ndarray<float, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using BoolOut = nb::ndarray<bool, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

void init_env_core(PyEnvCore* self, nb::handle engine, int64_t max_candidates, F64In estimate, F64In scale,
                   F64In total, F64In head_scale, F64In row_scale) {
  if (!nb::isinstance<PyEngine>(engine)) throw nb::type_error("Expected engine to be a schedgym.sim._engine.Engine");
  PyEngine* pe = nb::inst_ptr<PyEngine>(engine);
  if (max_candidates < 1 || max_candidates > (1 << 20))
    throw std::invalid_argument("Expected 1 <= max_candidates <= 2**20, got " + std::to_string(max_candidates));
  if (estimate.ndim() != 1) throw std::invalid_argument("Expected estimate to be one-dimensional");
  if (scale.ndim() != 1 || scale.shape(0) != 3 || total.ndim() != 1 || total.shape(0) != 3)
    throw std::invalid_argument("Expected scale and total to have shape (3,)");
  // The declaration in schedgym.decision.features and this build must agree on the layout.
  if (head_scale.ndim() != 1 || head_scale.shape(0) != schedgym::OBS_HEAD || row_scale.ndim() != 1 ||
      row_scale.shape(0) != schedgym::OBS_ROW)
    throw std::invalid_argument("Expected head_scale and row_scale of shapes (" + std::to_string(schedgym::OBS_HEAD) +
                                ",) and (" + std::to_string(schedgym::OBS_ROW) +
                                ",): the features of schedgym.decision.features, as this engine was built with");
  std::vector<double> est(estimate.data(), estimate.data() + estimate.shape(0));
  std::unique_ptr<EnvCore> core;
  {
    std::lock_guard<std::mutex> lock(pe->mu);
    core = std::make_unique<EnvCore>(pe->engine.get(), static_cast<int>(max_candidates), std::move(est), scale.data(),
                                     total.data(), head_scale.data(), row_scale.data());
  }
  new (self) PyEnvCore();
  self->engine_obj = nb::borrow<nb::object>(engine);
  self->engine = pe;
  self->core = std::move(core);
}

// The bound plan-level decision core (schedgym.sim._engine.PlanCore): as PyEnvCore.
struct PyPlanCore {
  nb::object engine_obj;
  PyEngine* engine = nullptr;
  std::unique_ptr<schedgym::PlanCore> core;
};

std::vector<double> vector_1d(const F64In& a, const char* name) {
  if (a.ndim() != 1) throw std::invalid_argument(std::string("Expected ") + name + " to be one-dimensional");
  return std::vector<double>(a.data(), a.data() + a.shape(0));
}

void init_plan_core(PyPlanCore* self, nb::handle engine, nb::list rules, int64_t max_plans, int64_t queue_rows,
                    F64In estimate, F64In scale, F64In total, F64In te_submit, F64In te_median, F64In be_submit,
                    F64In be_median, int64_t max_subset, bool compensated_sum) {
  if (!nb::isinstance<PyEngine>(engine)) throw nb::type_error("Expected engine to be a schedgym.sim._engine.Engine");
  PyEngine* pe = nb::inst_ptr<PyEngine>(engine);
  if (max_plans < 2 || max_plans > (1 << 20))
    throw std::invalid_argument("Expected 2 <= max_plans <= 2**20, got " + std::to_string(max_plans));
  if (queue_rows < 0 || queue_rows > (1 << 20))
    throw std::invalid_argument("Expected 0 <= queue_rows <= 2**20, got " + std::to_string(queue_rows));
  if (scale.ndim() != 1 || scale.shape(0) != 3 || total.ndim() != 1 || total.shape(0) != 3)
    throw std::invalid_argument("Expected scale and total to have shape (3,)");
  std::vector<std::unique_ptr<schedgym::Rule>> built;
  for (nb::handle item : rules) {
    nb::tuple pair = nb::cast<nb::tuple>(item);
    if (nb::len(pair) != 2) throw std::invalid_argument("Expected rules as (name, params) pairs");
    built.push_back(make_rule(nb::cast<std::string>(pair[0]), nb::cast<nb::dict>(pair[1])));
  }
  schedgym::RunningMedians medians;
  medians.submit[0] = vector_1d(te_submit, "te_submit");
  medians.median[0] = vector_1d(te_median, "te_median");
  medians.submit[1] = vector_1d(be_submit, "be_submit");
  medians.median[1] = vector_1d(be_median, "be_median");
  std::vector<double> est = vector_1d(estimate, "estimate");
  std::unique_ptr<schedgym::PlanCore> core;
  {
    std::lock_guard<std::mutex> lock(pe->mu);
    core = std::make_unique<schedgym::PlanCore>(pe->engine.get(), std::move(built), static_cast<int>(max_plans),
                                                static_cast<int>(queue_rows), std::move(est), scale.data(),
                                                total.data(), std::move(medians), static_cast<int>(max_subset),
                                                compensated_sum);
  }
  new (self) PyPlanCore();
  self->engine_obj = nb::borrow<nb::object>(engine);
  self->engine = pe;
  self->core = std::move(core);
}

nb::list unflatten_log(const std::vector<int64_t>& flat);

// The bound batch stepper (schedgym.sim._engine.BatchStepper): the stepper, the arrays it writes (kept alive
// here) and the EnvCore objects attached to it (kept alive until replaced, so that a sub-environment reset
// meanwhile frees nothing the stepper points to).
struct PyBatch {
  std::unique_ptr<schedgym::BatchStepper> stepper;
  std::vector<nb::object> arrays;
  std::vector<nb::object> cores;
};

// One array of the batch: C-contiguous, of the given dtype, with n rows of `cols` values (cols == 0: 1-D).
template <typename T>
T* batch_array(PyBatch& b, nb::handle obj, const char* name, const char* dtype, size_t n, size_t cols) {
  nb::ndarray<T, nb::c_contig, nb::device::cpu> a;
  if (!nb::try_cast(obj, a, false))  // no conversion: the stepper writes into these very arrays
    throw nb::type_error((std::string("Expected ") + name + " to be a C-contiguous numpy array of " + dtype).c_str());
  bool ok = cols ? (a.ndim() == 2 && a.shape(0) == n && a.shape(1) == cols) : (a.ndim() == 1 && a.shape(0) == n);
  if (!ok)
    throw std::invalid_argument(std::string("Expected ") + name + " to have shape (" + std::to_string(n) +
                                (cols ? ", " + std::to_string(cols) : std::string(",")) + ")");
  b.arrays.push_back(nb::borrow<nb::object>(obj));
  return a.data();
}

void init_batch(PyBatch* self, int64_t n_envs, int64_t max_candidates, double te_weight, double be_weight,
                double preemption_cost, bool bounded, int64_t threads, nb::dict arrays) {
  if (n_envs < 1 || n_envs > (1 << 20))
    throw std::invalid_argument("Expected 1 <= n_envs <= 2**20, got " + std::to_string(n_envs));
  if (max_candidates < 1 || max_candidates > (1 << 20))
    throw std::invalid_argument("Expected 1 <= max_candidates <= 2**20, got " + std::to_string(max_candidates));
  if (threads < 0 || threads > 1024)
    throw std::invalid_argument("Expected 0 <= threads <= 1024, got " + std::to_string(threads));
  const size_t n = static_cast<size_t>(n_envs), a = static_cast<size_t>(max_candidates) + 1;
  const size_t o = static_cast<size_t>(schedgym::OBS_HEAD + schedgym::OBS_ROW * max_candidates);
  PyBatch b;
  auto get = [&](const char* key) -> nb::handle {
    if (!arrays.contains(key)) throw std::invalid_argument(std::string("Missing batch array '") + key + "'");
    return arrays[key];
  };
  schedgym::BatchBuffers buf;
  buf.actions = batch_array<int64_t>(b, get("actions"), "actions", "int64", n, 0);
  buf.skip = batch_array<bool>(b, get("skip"), "skip", "bool", n, 0);
  buf.obs = batch_array<float>(b, get("obs"), "obs", "float32", n, o);
  buf.mask = batch_array<bool>(b, get("mask"), "mask", "bool", n, a);
  buf.reward = batch_array<double>(b, get("reward"), "reward", "float64", n, 0);
  buf.parts = batch_array<double>(b, get("parts"), "parts", "float64", n, 3);
  buf.terminated = batch_array<bool>(b, get("terminated"), "terminated", "bool", n, 0);
  buf.resolved = batch_array<bool>(b, get("resolved"), "resolved", "bool", n, 0);
  buf.sim_time = batch_array<double>(b, get("sim_time"), "sim_time", "float64", n, 0);
  buf.interval = batch_array<double>(b, get("interval"), "interval", "float64", n, 0);
  buf.te_job = batch_array<int64_t>(b, get("te_job"), "te_job", "int64", n, 0);
  buf.n_candidates = batch_array<int64_t>(b, get("n_candidates"), "n_candidates", "int64", n, 0);
  buf.preemptions = batch_array<int64_t>(b, get("preemptions"), "preemptions", "int64", n, 0);
  buf.decisions = batch_array<int64_t>(b, get("decisions"), "decisions", "int64", n, 0);
  buf.last_accrued = batch_array<double>(b, get("last_accrued"), "last_accrued", "float64", n, 2);
  if (nb::len(arrays) != b.arrays.size()) throw std::invalid_argument("Unknown batch arrays");
  schedgym::RewardConfig reward{te_weight, be_weight, preemption_cost, bounded};
  auto stepper = std::make_unique<schedgym::BatchStepper>(static_cast<int>(n_envs), static_cast<int>(max_candidates),
                                                          reward, static_cast<int>(threads), buf);
  new (self) PyBatch();
  self->stepper = std::move(stepper);
  self->arrays = std::move(b.arrays);
  self->cores.resize(n);
}

template <typename T>
nb::list to_list(const std::vector<T>& v) {
  nb::list out;
  for (const T& x : v) out.append(x);
  return out;
}

// A decision core's log, flattened (n_nodes, n_victims, nodes..., victims... per resolve), as [(nodes, victims)].
nb::list unflatten_log(const std::vector<int64_t>& flat) {
  nb::list out;
  for (size_t i = 0; i + 1 < flat.size();) {
    size_t nn = static_cast<size_t>(flat[i]), nv = static_cast<size_t>(flat[i + 1]);
    i += 2;
    nb::list nodes, victims;
    for (size_t j = 0; j < nn; ++j) nodes.append(flat[i++]);
    for (size_t j = 0; j < nv; ++j) victims.append(flat[i++]);
    out.append(nb::make_tuple(nodes, victims));
  }
  return out;
}

}  // namespace

NB_MODULE(_engine, m) {
  m.doc() = "schedgym's native simulation engine";
  m.attr("ENGINE_VERSION") = schedgym::ENGINE_VERSION;
  {
    // Where EnvCore's observe() applies the declared scales (decision.hpp), for a test to check against
    // schedgym.decision.features.
    namespace f = schedgym::feature;
    nb::dict head, row;
    head["wait"] = f::WAIT;
    head["duration_estimate"] = f::DURATION_ESTIMATE;
    head["queued_te"] = f::QUEUED_TE;
    head["queued_be"] = f::QUEUED_BE;
    head["running_be"] = f::RUNNING_BE;
    row["grace_period"] = f::GRACE_PERIOD;
    row["elapsed"] = f::ELAPSED;
    row["remaining_estimate"] = f::REMAINING_ESTIMATE;
    nb::dict index;
    index["head"] = head;
    index["row"] = row;
    m.attr("FEATURE_INDEX") = index;
  }

  nb::class_<PyEngine>(m, "Engine",
                       "One simulation: the rules of docs/semantics.md, with the same results as the Python engine "
                       "(schedgym.sim.python_engine).")
      .def("__init__", &init_engine, "capacity"_a, "submit"_a, "duration"_a, "member"_a, "gang"_a, "job_class"_a,
           "grace"_a, nb::kw_only(), "priority_queue"_a, "backfill"_a, "first_fit"_a, "max_preemptions"_a,
           "restart_overhead"_a, "preemption"_a, "job_ids"_a = nb::none(), "restart"_a = nb::none(),
           "capacity (n_nodes, 3) and member (n_jobs, 3, per-node demand) float64; submit, duration, grace float64 "
           "and gang, job_class (0 TE, 1 BE) int64, one per job. job_ids (optional) only name jobs in error "
           "messages. restart (optional, float64, one per job): each job's restart overhead, instead of "
           "restart_overhead for every job.")

      // ------------------------------------------------------------ driving
      .def("clone", &clone_engine, nb::rv_policy::take_ownership,
           "An independent engine in exactly the same state (a copy of the C++ state, not a replay).")
      .def(
          "advance",
          [](PyEngine& s, double until) {
            nb::gil_scoped_release release;
            std::lock_guard<std::mutex> lock(s.mu);
            return s.engine->advance(until);
          },
          "until"_a = std::numeric_limits<double>::infinity(),
          "Run until a TE job needs a preemption decision (returns its index) or the workload drains (-1); or "
          "stop (-1, not done) before processing events later than ``until``.")
      .def(
          "resolve",
          [](PyEngine& s, const std::vector<int64_t>& nodes, const std::vector<int64_t>& victims) {
            std::lock_guard<std::mutex> lock(s.mu);
            s.engine->resolve(nodes, victims);
          },
          "nodes"_a, "victims"_a,
          "Answer the pending request: the nodes to use and the victims (job indices); empty nodes declines.")
      .def(
          "run_declining",
          [](PyEngine& s, double until) {
            nb::gil_scoped_release release;
            std::lock_guard<std::mutex> lock(s.mu);
            s.engine->run_declining(until);
          },
          "until"_a = std::numeric_limits<double>::infinity(),
          "advance(until) to the end (or to ``until``), declining every request.")
      .def(
          "run_rule",
          [](PyEngine& s, const std::string& name, nb::dict params, double until, int64_t max_decisions,
             bool log) -> nb::object {
            std::unique_ptr<schedgym::Rule> rule = make_rule(name, params);
            LoggingRule logging(*rule);
            {
              nb::gil_scoped_release release;
              std::lock_guard<std::mutex> lock(s.mu);
              s.engine->run_rule(log ? static_cast<schedgym::Rule&>(logging) : *rule, until, max_decisions);
            }
            // The Generator continues from where the Python rule would have left it.
            if (auto* random = dynamic_cast<schedgym::RandomRule*>(rule.get()))
              schedgym::set_pcg64_state(params["rng"], random->rng().state());
            if (!log) return nb::none();
            nb::list out;
            for (const schedgym::Plan& p : logging.plans)
              out.append(nb::make_tuple(to_list(p.nodes), to_list(p.victims)));
            return out;
          },
          "name"_a, "params"_a, "until"_a = std::numeric_limits<double>::infinity(), "max_decisions"_a = -1,
          "log"_a = false,
          "advance(until) to the end with a built-in rule ('fitgpp' with lam, grace_scale, order, rank; 'k8s'; "
          "'decline'; 'random' with rng, a numpy Generator over PCG64, which it advances as the Python rule would) "
          "answering every request, in C++; stop at ``until`` (as advance does), or right after the rule has "
          "answered ``max_decisions`` requests if that is >= 0. With ``log``, return the plans it made, "
          "[(nodes, victims), ...] in order, else None.")

      // ------------------------------------------------------------ scalars
      .def_prop_ro("now",
                   [](PyEngine& s) {
                     std::lock_guard<std::mutex> lock(s.mu);
                     return s.engine->now();
                   })
      .def_prop_ro("n_preemptions",
                   [](PyEngine& s) {
                     std::lock_guard<std::mutex> lock(s.mu);
                     return s.engine->n_preemptions();
                   })
      .def_prop_ro("n_requests",
                   [](PyEngine& s) {
                     std::lock_guard<std::mutex> lock(s.mu);
                     return s.engine->n_requests();
                   })
      .def_prop_ro("done",
                   [](PyEngine& s) {
                     std::lock_guard<std::mutex> lock(s.mu);
                     return s.engine->done();
                   })
      .def_prop_ro(
          "pending",
          [](PyEngine& s) {
            std::lock_guard<std::mutex> lock(s.mu);
            return s.engine->pending();
          },
          "The job index of the pending request, or -1.")
      .def_prop_ro(
          "queue_lengths",
          [](PyEngine& s) {
            std::lock_guard<std::mutex> lock(s.mu);
            return std::make_pair(s.engine->queued_te(), s.engine->queued_be());
          },
          "(TE, BE) jobs pending, reserved TE jobs included.")
      .def_prop_ro("n_nodes", [](PyEngine& s) { return s.engine->n_nodes(); })
      .def_prop_ro("n_jobs", [](PyEngine& s) { return s.engine->n_jobs(); })
      .def(
          "accrued",
          [](PyEngine& s) {
            std::lock_guard<std::mutex> lock(s.mu);
            const double* a = s.engine->accrued();
            return std::make_pair(a[0], a[1]);
          },
          "Slowdown accrued so far, (TE, BE).")
      .def(
          "accrued_bounded",
          [](PyEngine& s) {
            std::lock_guard<std::mutex> lock(s.mu);
            const double* a = s.engine->accrued_bounded();
            return std::make_pair(a[0], a[1]);
          },
          "Bounded slowdown accrued so far, (TE, BE).")
      .def(
          "rate",
          [](PyEngine& s) {
            std::lock_guard<std::mutex> lock(s.mu);
            const double* r = s.engine->rate();
            const double* b = s.engine->rate_bounded();
            return nb::make_tuple(r[0], r[1], b[0], b[1]);
          },
          "What accrued() and accrued_bounded() grow by per simulated second until the next event: "
          "(TE, BE, TE bounded, BE bounded).")

      // ------------------------------------------------------------ per node
      .def(
          "avail",
          [](PyEngine& s) {
            std::lock_guard<std::mutex> lock(s.mu);
            const auto& v = s.engine->avail();
            return to_numpy<double>(v.data(), v.size() / 3, 3);
          },
          "What any job may use, per node (a copy, shape (n_nodes, 3)).")
      .def(
          "held",
          [](PyEngine& s) {
            std::lock_guard<std::mutex> lock(s.mu);
            const auto& v = s.engine->held();
            return to_numpy<double>(v.data(), v.size() / 3, 3);
          },
          "What is set aside for reserved TE jobs, per node (a copy, shape (n_nodes, 3)).")
      .def(
          "candidates",
          [](PyEngine& s) {
            std::lock_guard<std::mutex> lock(s.mu);
            return s.engine->candidates();
          },
          "[(node, [job index, ...]), ...]: preemption candidates of the nodes that have any, ascending.")
      .def(
          "running_on",
          [](PyEngine& s, int node) {
            std::lock_guard<std::mutex> lock(s.mu);
            return s.engine->running_on(node);
          },
          "node"_a, "Jobs that hold resources on the node (running or in their grace period), ascending.")
      .def(
          "queued",
          [](PyEngine& s, int64_t limit) {
            if (limit < 0) throw std::invalid_argument("Expected limit >= 0, got " + std::to_string(limit));
            std::lock_guard<std::mutex> lock(s.mu);
            return s.engine->queued(limit);
          },
          "limit"_a,
          "([TE job index, ...], [BE job index, ...]): the up-to-limit oldest jobs of each class waiting in the "
          "queues (not reserved), in queue order.")

      // ------------------------------------------------------------ per job
      .def(
          "job_records",
          [](PyEngine& s, const std::vector<int>& jobs) {
            // The runtime fields of a few jobs (a request's job and candidates), so that a Python policy's
            // request costs O(candidates), not O(jobs).
            std::lock_guard<std::mutex> lock(s.mu);
            const Engine& e = *s.engine;
            nb::list out;
            for (int j : jobs) {
              if (j < 0 || j >= e.n_jobs()) throw nb::index_error("job index out of range");
              nb::list nodes;
              for (int n : e.job_nodes(j)) nodes.append(n);
              out.append(nb::make_tuple(e.state()[j], e.remaining()[j], e.preemptions()[j], e.run_start()[j],
                                        e.run_overhead()[j], e.first_start()[j], e.completion()[j],
                                        e.grace_time()[j], e.overhead_time()[j], e.run_time()[j],
                                        nb::tuple(nodes)));
            }
            return out;
          },
          "jobs"_a,
          "(state, remaining, preemptions, run_start, run_overhead, first_start, completion, grace_time, "
          "overhead_time, run_time, nodes) of each of ``jobs``.")
      .def(
          "job_nodes",
          [](PyEngine& s, int job) {
            std::vector<int> nodes;
            {
              std::lock_guard<std::mutex> lock(s.mu);
              nodes = s.engine->job_nodes(job);
            }
            nb::list out;
            for (int n : nodes) out.append(n);
            return nb::tuple(out);
          },
          "job"_a, "The nodes the job runs on, or is reserved on (a tuple; empty while queued).")
      .def("state", [](PyEngine& s) { return per_job<int8_t>(s, &Engine::state); }, "JobState values (int8).")
      .def("remaining", [](PyEngine& s) { return per_job<double>(s, &Engine::remaining); })
      .def("preemptions", [](PyEngine& s) { return per_job<int64_t>(s, &Engine::preemptions); })
      .def("run_start", [](PyEngine& s) { return per_job<double>(s, &Engine::run_start); })
      .def("run_overhead", [](PyEngine& s) { return per_job<double>(s, &Engine::run_overhead); })
      .def("first_start", [](PyEngine& s) { return per_job<double>(s, &Engine::first_start); })
      .def("completion", [](PyEngine& s) { return per_job<double>(s, &Engine::completion); })
      .def("grace_time", [](PyEngine& s) { return per_job<double>(s, &Engine::grace_time); })
      .def("overhead_time", [](PyEngine& s) { return per_job<double>(s, &Engine::overhead_time); })
      .def("run_time", [](PyEngine& s) { return per_job<double>(s, &Engine::run_time); })
      .def(
          "segments",
          [](PyEngine& s) {
            std::lock_guard<std::mutex> lock(s.mu);
            const schedgym::SegmentRows& g = s.engine->segments();
            size_t n = g.job.size();
            return nb::make_tuple(to_numpy<int64_t>(g.job.data(), n), to_numpy<int64_t>(g.node.data(), n),
                                  to_numpy<double>(g.start.data(), n), to_numpy<double>(g.end.data(), n),
                                  to_numpy<bool>(g.completed.data(), n));
          },
          "(job, node, start, end, completed) arrays, one row per closed run segment and node, in closing order.");

  // ---------------------------------------------------------------- the decision protocol (decision.hpp)
  nb::class_<PyEnvCore>(m, "EnvCore",
                        "The victim-by-victim decision protocol of schedgym.decision.stepwise on an Engine's state "
                        "(PreemptionEnv's native path): the same rows, plans and observations, computed in C++.")
      .def("__init__", &init_env_core, "engine"_a, "max_candidates"_a, "estimate"_a, "scale"_a, "total"_a,
           "head_scale"_a, "row_scale"_a,
           "engine: the Engine to drive (nothing else may drive it meanwhile); estimate: one float64 factor per job "
           "(DecisionEncoder.estimate); scale, total: DecisionEncoder.scale and .total (3 values each); head_scale, "
           "row_scale: the features' declared scales (schedgym.decision.features.feature_scales, 0 where none).")
      .def(
          "next_decision",
          [](PyEnvCore& s) {
            nb::gil_scoped_release release;
            std::lock_guard<std::mutex> lock(s.engine->mu);
            return s.core->next_decision();
          },
          "Advance to the next request that offers a choice (True), declining those that offer none, or to the "
          "end (False).")
      .def(
          "choose",
          [](PyEnvCore& s, int64_t action) {
            std::lock_guard<std::mutex> lock(s.engine->mu);
            if (s.core->job() < 0) throw std::invalid_argument("choose() called with no decision pending");
            if (action < 0 || action > static_cast<int64_t>(s.core->rows().size()))
              throw std::invalid_argument("Action " + std::to_string(action) + " is illegal; legal actions are 0.." +
                                          std::to_string(s.core->rows().size()));
            return s.core->choose(static_cast<int>(action));
          },
          "action"_a,
          "0 declines, i >= 1 chooses row i - 1. Returns the number of victims preempted once the request is "
          "resolved (0 for a decline), or -1 if the decision goes on. Call next_decision() after a resolve.")
      .def(
          "attach",
          [](PyEnvCore& s) {
            std::lock_guard<std::mutex> lock(s.engine->mu);
            return s.core->attach();
          },
          "Begin deciding the engine's pending request, if any (True); for an engine rebuilt by replay.")
      .def(
          "restore",
          [](PyEnvCore& s, const std::vector<int>& chosen, const std::vector<int>& targets) {
            std::lock_guard<std::mutex> lock(s.engine->mu);
            s.core->restore(chosen, targets);
          },
          "chosen"_a, "targets"_a, "Continue the pending decision from these chosen victims and target nodes.")
      .def(
          "observe",
          [](PyEnvCore& s, F32Out out) {
            if (out.shape(0) != static_cast<size_t>(s.core->observation_size()))
              throw std::invalid_argument("Expected a float32 array of shape (" +
                                          std::to_string(s.core->observation_size()) + ",)");
            std::lock_guard<std::mutex> lock(s.engine->mu);
            s.core->observe(out.data());
          },
          nb::arg("out").noconvert(), "Write the observation into out (float32, C-contiguous, shape (20 + 13 * max_candidates,)).")
      .def(
          "mask",
          [](PyEnvCore& s, BoolOut out) {
            if (out.shape(0) != static_cast<size_t>(s.core->max_candidates()) + 1)
              throw std::invalid_argument("Expected a bool array of shape (" +
                                          std::to_string(s.core->max_candidates() + 1) + ",)");
            std::lock_guard<std::mutex> lock(s.engine->mu);
            s.core->mask(out.data());
          },
          nb::arg("out").noconvert(), "Write the legal actions into out (bool, shape (max_candidates + 1,)).")
      .def(
          "rows",
          [](PyEnvCore& s) {
            std::lock_guard<std::mutex> lock(s.engine->mu);
            return s.core->rows();
          },
          "[(candidate job index, node), ...]: action i chooses row i - 1.")
      .def(
          "chosen",
          [](PyEnvCore& s) {
            std::lock_guard<std::mutex> lock(s.engine->mu);
            return to_list(s.core->chosen());
          },
          "Job indices of the victims chosen in this attempt, in order.")
      .def(
          "targets",
          [](PyEnvCore& s) {
            std::lock_guard<std::mutex> lock(s.engine->mu);
            return to_list(s.core->targets());
          },
          "Nodes of the chosen victims' rows, in order of first choice.")
      .def(
          "take_log",
          [](PyEnvCore& s) {
            std::vector<int64_t> flat;
            {
              std::lock_guard<std::mutex> lock(s.engine->mu);
              flat = s.core->take_log();
            }
            return unflatten_log(flat);
          },
          "The (nodes, victims) of every resolve made since the last call, in order (for replay).")
      .def_prop_ro(
          "job",
          [](PyEnvCore& s) {
            std::lock_guard<std::mutex> lock(s.engine->mu);
            return s.core->job();
          },
          "The index of the TE job being decided, or -1.")
      .def_prop_ro(
          "n_rows",
          [](PyEnvCore& s) {
            std::lock_guard<std::mutex> lock(s.engine->mu);
            return s.core->rows().size();
          },
          "Candidate rows of the decision (legal actions: 0..n_rows).")
      .def_prop_ro(
          "n_offered",
          [](PyEnvCore& s) {
            std::lock_guard<std::mutex> lock(s.engine->mu);
            return s.core->n_offered();
          },
          "Decisions offered so far.")
      .def_prop_ro("max_candidates", [](PyEnvCore& s) { return s.core->max_candidates(); })
      .def_prop_ro("observation_size", [](PyEnvCore& s) { return s.core->observation_size(); });

  // ---------------------------------------------------------------- the plan-level protocol (plan_core.hpp)
  m.def(
      "plan_feature_names",
      [](const std::vector<std::string>& rules) {
        return nb::make_tuple(schedgym::plan_head_names(), schedgym::plan_queue_names(),
                              schedgym::plan_row_names(rules));
      },
      "rules"_a,
      "(head, queue row, plan row): the names of the features PlanCore computes, in observation order, with the "
      "plan row's per-rule flags named after ``rules``.");
  m.def(
      "prefix_lower_medians",
      [](F64In values) {
        if (values.ndim() != 1) throw std::invalid_argument("Expected values to be one-dimensional");
        const size_t n = values.shape(0);
        std::vector<double> out(n);
        schedgym::prefix_lower_medians(values.data(), n, out.data());
        return to_numpy<double>(out.data(), n);
      },
      "values"_a,
      "schedgym.decision.scalefree.prefix_lower_medians in C++: out[i] is the lower median of values[: i + 1] "
      "(float64).");
  m.def(
      "python_sum",
      [](F64In values, bool compensated) {
        if (values.ndim() != 1) throw std::invalid_argument("Expected values to be one-dimensional");
        return schedgym::py_sum(values.data(), values.shape(0), compensated);
      },
      "values"_a, "compensated"_a,
      "sum(values) as PlanCore computes Python's sum() of floats: compensated as from Python 3.12 on, or not.");
  nb::class_<PyPlanCore>(m, "PlanCore",
                         "The plan-level decision protocol of schedgym.decision.plan_mode on an Engine's state "
                         "(PreemptionPlan-v1's native path): the same options, masks and observations (version 2), "
                         "computed in C++.")
      .def("__init__", &init_plan_core, "engine"_a, "rules"_a, "max_plans"_a, "queue_rows"_a, "estimate"_a,
           "scale"_a, "total"_a, "te_submit"_a, "te_median"_a, "be_submit"_a, "be_median"_a, "max_subset"_a,
           "compensated_sum"_a,
           "engine: the Engine to drive (nothing else may drive it meanwhile); rules: [(name, params)] of the native "
           "rules whose plans are offered, in order (as Engine.run_rule takes them); estimate: one float64 factor "
           "per job; scale, total: ScaleFreeObserver.scale and .total; te_submit, te_median, be_submit, be_median: "
           "scalefree.WorkloadScales per class; max_subset: plans.MAX_SUBSET_CANDIDATES; compensated_sum: sum "
           "floats as Python >= 3.12's sum() does.")
      .def(
          "next_decision",
          [](PyPlanCore& s) {
            nb::gil_scoped_release release;
            std::lock_guard<std::mutex> lock(s.engine->mu);
            return s.core->next_decision();
          },
          "Advance to the next request that offers a choice (True), declining those whose only option is to wait, "
          "or to the end (False).")
      .def(
          "choose",
          [](PyPlanCore& s, int64_t action) {
            std::lock_guard<std::mutex> lock(s.engine->mu);
            if (s.core->job() < 0) throw std::invalid_argument("choose() called with no decision pending");
            const int64_t n = static_cast<int64_t>(s.core->n_options());
            if (action < 0 || action >= n)
              throw std::invalid_argument("Action " + std::to_string(action) + " is illegal; legal actions are 0.." +
                                          std::to_string(n - 1));
            return s.core->choose(static_cast<int>(action));
          },
          "action"_a,
          "Resolve the request with option ``action``; returns the number of victims preempted (0 for wait). Call "
          "next_decision() next.")
      .def(
          "attach",
          [](PyPlanCore& s) {
            std::lock_guard<std::mutex> lock(s.engine->mu);
            return s.core->attach();
          },
          "Begin deciding the engine's pending request, if any (True); for an engine rebuilt by replay or copied.")
      .def(
          "observe",
          [](PyPlanCore& s, F32Out out) {
            if (out.shape(0) != static_cast<size_t>(s.core->observation_size()))
              throw std::invalid_argument("Expected a float32 array of shape (" +
                                          std::to_string(s.core->observation_size()) + ",)");
            std::lock_guard<std::mutex> lock(s.engine->mu);
            s.core->observe(out.data());
          },
          nb::arg("out").noconvert(), "Write the observation into out (float32, C-contiguous).")
      .def(
          "mask",
          [](PyPlanCore& s, BoolOut out) {
            if (out.shape(0) != static_cast<size_t>(s.core->max_plans()))
              throw std::invalid_argument("Expected a bool array of shape (" + std::to_string(s.core->max_plans()) +
                                          ",)");
            std::lock_guard<std::mutex> lock(s.engine->mu);
            s.core->mask(out.data());
          },
          nb::arg("out").noconvert(), "Write the legal actions into out (bool, shape (max_plans,)).")
      .def(
          "options",
          [](PyPlanCore& s) {
            std::lock_guard<std::mutex> lock(s.engine->mu);
            nb::list out;
            for (size_t i = 0; i < s.core->n_options(); ++i) {
              const schedgym::PlanChoice& o = s.core->option(i);
              out.append(nb::make_tuple(nb::tuple(to_list(o.plan.nodes)), nb::tuple(to_list(o.plan.victims)),
                                        o.sources));
            }
            return out;
          },
          "[(nodes, victims, sources), ...]: the options of the decision, action i taking option i; sources is a "
          "bit set (1: wait, 2 << r: rule r, 2 << n_rules: the per-node search).")
      .def(
          "medians",
          [](PyPlanCore& s, double now) {
            double out[2];
            s.core->medians(now, out);
            return std::make_pair(out[0], out[1]);
          },
          "now"_a, "scalefree.WorkloadScales.medians(now): (TE, BE).")
      .def(
          "take_log",
          [](PyPlanCore& s) {
            std::vector<int64_t> flat;
            {
              std::lock_guard<std::mutex> lock(s.engine->mu);
              flat = s.core->take_log();
            }
            return unflatten_log(flat);
          },
          "The (nodes, victims) of every resolve made since the last call, in order (for replay).")
      .def_prop_ro(
          "job",
          [](PyPlanCore& s) {
            std::lock_guard<std::mutex> lock(s.engine->mu);
            return s.core->job();
          },
          "The index of the TE job being decided, or -1.")
      .def_prop_ro(
          "n_options",
          [](PyPlanCore& s) {
            std::lock_guard<std::mutex> lock(s.engine->mu);
            return s.core->n_options();
          },
          "Options of the decision, wait included (0 with none pending).")
      .def_prop_ro(
          "n_offered",
          [](PyPlanCore& s) {
            std::lock_guard<std::mutex> lock(s.engine->mu);
            return s.core->n_offered();
          },
          "Decisions offered so far.")
      .def_prop_ro("max_plans", [](PyPlanCore& s) { return s.core->max_plans(); })
      .def_prop_ro("queue_rows", [](PyPlanCore& s) { return s.core->queue_rows(); })
      .def_prop_ro("observation_size", [](PyPlanCore& s) { return s.core->observation_size(); });

  // ---------------------------------------------------------------- many decision steps at once (batch.hpp)
  nb::class_<PyBatch>(m, "BatchStepper",
                      "PreemptionEnv.step for the EnvCores of a vector environment in one call, on a few threads "
                      "without the GIL, writing into the caller's numpy arrays (schedgym.envs.vector_env).")
      .def("__init__", &init_batch, "n_envs"_a, "max_candidates"_a, nb::kw_only(), "te_weight"_a, "be_weight"_a,
           "preemption_cost"_a, "bounded"_a, "threads"_a, "arrays"_a,
           "arrays: a dict of C-contiguous numpy arrays with n_envs rows (see BatchBuffers in batch.hpp): actions, "
           "te_job, n_candidates, preemptions, decisions (int64); skip, terminated, resolved (bool); reward, "
           "sim_time, interval (float64); parts (float64, 3 columns), last_accrued (float64, 2 columns); obs "
           "(float32, observation size columns); mask (bool, max_candidates + 1 columns). threads: threads that "
           "step, the caller's included (0: the hardware's count), at most n_envs.")
      .def(
          "attach",
          [](PyBatch& b, int64_t i, nb::handle core) {
            if (!nb::isinstance<PyEnvCore>(core)) throw nb::type_error("Expected a schedgym.sim._engine.EnvCore");
            if (i < 0 || i >= b.stepper->n_envs()) throw nb::index_error("sub-environment index out of range");
            PyEnvCore* c = nb::inst_ptr<PyEnvCore>(core);
            b.stepper->attach(static_cast<int>(i), c->core.get(), c->engine->engine.get(), &c->engine->mu);
            b.cores[static_cast<size_t>(i)] = nb::borrow<nb::object>(core);
          },
          "i"_a, "core"_a, "Sub-environment i steps this EnvCore from now on.")
      .def(
          "step",
          [](PyBatch& b) {
            nb::gil_scoped_release release;
            b.stepper->step();
          },
          "Step every sub-environment not marked in skip with its action; results go to the arrays.")
      .def(
          "begin", [](PyBatch& b) { b.stepper->begin(); },
          "Start step() on the worker threads and return: the caller may reset the skipped sub-environments "
          "meanwhile (and must touch nothing else), then call finish().")
      .def(
          "finish",
          [](PyBatch& b) {
            nb::gil_scoped_release release;
            b.stepper->finish();
          },
          "Take part in the step begun by begin() and wait for it to end.")
      .def_prop_ro("n_threads", [](PyBatch& b) { return b.stepper->n_threads(); },
                   "Threads that step, the caller's included.");
}
