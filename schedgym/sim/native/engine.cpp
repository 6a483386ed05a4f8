// The native simulation engine; see engine.hpp. Sections and method names follow
// schedgym/sim/python_engine.py (Python's `_schedule_pass` is `schedule_pass` here, and so on).
//
// Floating point: every accumulation (avail, held, owed, remaining, run/grace/overhead times, slowdown
// accrual) does the Python engine's operations in the Python engine's order, and the build keeps the
// compiler from contracting or reassociating them (-ffp-contract=off, no -ffast-math; see CMakeLists.txt).
#include "engine.hpp"

#include "resources.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>

namespace schedgym {

namespace {

// schedgym.sim.metrics.TAU: the bounded slowdown's floor on the duration.
constexpr double TAU = 10.0;
constexpr double NaN = std::numeric_limits<double>::quiet_NaN();

// numpy's maximum/minimum for floats (the first argument wins ties, as in numpy's scalar loops; NaN never
// occurs here).
inline double np_maximum(double a, double b) { return (a >= b) ? a : b; }
inline double np_minimum(double a, double b) { return (a <= b) ? a : b; }

// numpy's ndarray.round(9): rint(x * 1e9) / 1e9, rounding half to even (the default rounding mode).
inline double round9(double x) { return std::nearbyint(x * 1e9) / 1e9; }

// Python's repr() of a float ("0.5", "8.0", "1e-05", "1e+16", "inf"), for error messages that must read as
// the Python engine's: the shortest round-trip digits, fixed notation for decimal exponents in [-4, 16).
std::string py_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  std::string s(buf, res.ptr);
  std::string sign;
  if (!s.empty() && s[0] == '-') {
    sign = "-";
    s.erase(0, 1);
  }
  size_t e = s.find('e');
  int exp10 = std::stoi(s.substr(e + 1));
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (s[i] != '.') digits += s[i];
  int n = static_cast<int>(digits.size());
  int decpt = exp10 + 1;  // digits = 0.d1d2... x 10^decpt
  std::string out;
  if (decpt <= -4 || decpt > 16) {
    out = digits.substr(0, 1);
    if (n > 1) out += "." + digits.substr(1);
    char ebuf[16];
    std::snprintf(ebuf, sizeof ebuf, "e%+.02d", decpt - 1);
    out += ebuf;
  } else if (decpt <= 0) {
    out = "0." + std::string(-decpt, '0') + digits;
  } else if (decpt >= n) {
    out = digits + std::string(decpt - n, '0') + ".0";
  } else {
    out = digits.substr(0, decpt) + "." + digits.substr(decpt);
  }
  return sign + out;
}

// Python's repr() of a list of ints ("[1, 2]"), or of a tuple ("(1,)", "(1, 2)").
template <typename Seq>
std::string py_list(const Seq& xs, bool tuple = false) {
  std::string out = tuple ? "(" : "[";
  size_t i = 0;
  for (auto x : xs) {
    if (i++) out += ", ";
    out += std::to_string(x);
  }
  if (tuple && i == 1) out += ",";
  out += tuple ? ")" : "]";
  return out;
}

std::string py_row(const double* r) {
  return "[" + py_repr(r[0]) + ", " + py_repr(r[1]) + ", " + py_repr(r[2]) + "]";
}

void remove_first(std::vector<int>& v, int x) {  // list.remove(x)
  auto it = std::find(v.begin(), v.end(), x);
  if (it != v.end()) v.erase(it);
}

void discard(std::vector<int>& v, int x) {  // set.discard(x) on an unordered vector
  auto it = std::find(v.begin(), v.end(), x);
  if (it != v.end()) {
    *it = v.back();
    v.pop_back();
  }
}

bool finite_at_least(double x, double lo) { return std::isfinite(x) && x >= lo; }

using ShapeKey = std::tuple<int, double, double, double, int>;

struct ShapeKeyHash {
  // A multiply-xorshift mix of the key's bits: a few cycles per job, where std::hash<double> hashes bytes.
  size_t operator()(const ShapeKey& k) const noexcept {
    auto bits = [](double x) {
      x += 0.0;  // -0.0 and 0.0 are one key: x + 0.0 is +0.0 for either
      uint64_t b;
      std::memcpy(&b, &x, sizeof b);
      return b;
    };
    uint64_t h = static_cast<uint64_t>(std::get<0>(k)) << 32 | static_cast<uint32_t>(std::get<4>(k));
    for (uint64_t part : {bits(std::get<1>(k)), bits(std::get<2>(k)), bits(std::get<3>(k))}) {
      h = (h ^ part) * 0x9e3779b97f4a7c15ULL;
      h ^= h >> 29;
    }
    return static_cast<size_t>(h);
  }
};

}  // namespace

// ==================================================================== construction (PythonSimulator.__init__)

Engine::Engine(int n_nodes, const double* capacity, int n_jobs, const double* submit, const double* duration,
               const double* member, const int64_t* gang, const int64_t* job_class, const double* grace,
               const EngineConfig& config, const double* restart)
    : config_(config), n_nodes_(n_nodes), n_jobs_(n_jobs) {
  if (n_nodes < 0 || n_jobs < 0) throw std::invalid_argument("negative number of nodes or jobs");
  if (config.max_preemptions < 0)
    throw std::invalid_argument("Expected max_preemptions >= 0, got " + std::to_string(config.max_preemptions));
  if (!finite_at_least(config.restart_overhead, 0.0))
    throw std::invalid_argument("Expected restart_overhead >= 0, got " + py_repr(config.restart_overhead));
  job_label = [](int i) { return "#" + std::to_string(i); };

  capacity_.assign(capacity, capacity + 3 * static_cast<size_t>(n_nodes));
  for (double c : capacity_)
    if (!finite_at_least(c, 0.0)) throw std::invalid_argument("capacities must be finite and >= 0");
  avail_ = capacity_;
  held_.assign(capacity_.size(), 0.0);
  running_on_.resize(n_nodes);
  cand_on_.resize(n_nodes);
  res_on_.resize(n_nodes);

  submit_.assign(submit, submit + n_jobs);
  duration_.assign(duration, duration + n_jobs);
  grace_.assign(grace, grace + n_jobs);
  if (restart)
    restart_.assign(restart, restart + n_jobs);
  else
    restart_.assign(n_jobs, config.restart_overhead);
  member_.assign(member, member + 3 * static_cast<size_t>(n_jobs));
  gang_.resize(n_jobs);
  class_.resize(n_jobs);
  shape_.resize(n_jobs);
  node_off_.resize(n_jobs);
  inv_duration_.resize(n_jobs);
  inv_bounded_.resize(n_jobs);
  size_t total_nodes = 0;
  for (int i = 0; i < n_jobs; ++i) {
    auto who = [i] { return "Job index " + std::to_string(i); };
    if (!finite_at_least(submit_[i], 0.0))
      throw std::invalid_argument(who() + ": submit time must be finite and >= 0");
    if (!(std::isfinite(duration_[i]) && duration_[i] > 0.0))
      throw std::invalid_argument(who() + ": duration must be finite and > 0");
    if (!finite_at_least(grace_[i], 0.0))
      throw std::invalid_argument(who() + ": grace period must be finite and >= 0");
    if (!finite_at_least(restart_[i], 0.0))
      throw std::invalid_argument(who() + ": restart overhead must be finite and >= 0");
    for (int r = 0; r < 3; ++r)
      if (!finite_at_least(member_[3 * i + r], 0.0))
        throw std::invalid_argument(who() + ": demand must be finite and >= 0");
    if (job_class[i] != 0 && job_class[i] != 1)
      throw std::invalid_argument(who() + ": job class must be 0 (TE) or 1 (BE)");
    if (gang[i] < 1 || gang[i] > n_nodes)
      throw std::invalid_argument(who() + " can never run: it needs " + std::to_string(gang[i]) +
                                  " node(s), the cluster has " + std::to_string(n_nodes));
    gang_[i] = static_cast<int>(gang[i]);
    class_[i] = static_cast<int>(job_class[i]);
    node_off_[i] = total_nodes;
    total_nodes += gang_[i];
    inv_duration_[i] = 1.0 / duration_[i];
    inv_bounded_[i] = 1.0 / py_max(duration_[i], TAU);
  }

  // Shapes by the exact key (class, member row, gang size), numbered in order of first appearance. The map
  // compares the doubles with ==, so keys are equal exactly when Python's tuples are (0.0 == -0.0 included;
  // the demands are finite); a hash table, as a workload has thousands of jobs and a few dozen shapes.
  std::unordered_map<ShapeKey, int, ShapeKeyHash> shape_ids;
  shape_ids.reserve(64);
  for (int i = 0; i < n_jobs; ++i) {
    const double* m = member_row(i);
    auto [it, is_new] = shape_ids.try_emplace(ShapeKey{class_[i], m[0], m[1], m[2], gang_[i]},
                                              static_cast<int>(shape_k_.size()));
    shape_[i] = it->second;
    if (!is_new) continue;
    int fitting = 0;  // PythonSimulator._fits_somewhere (the Python side has checked it already)
    for (int n = 0; n < n_nodes; ++n) {
      const double* c = &capacity_[3 * static_cast<size_t>(n)];
      fitting += covers(c, m);
    }
    if (fitting < gang_[i])
      throw std::invalid_argument("Job index " + std::to_string(i) + " can never run: it needs " +
                                  std::to_string(gang_[i]) + " node(s) with " + py_row(m) + " each, and only " +
                                  std::to_string(fitting) + " node(s) are that large");
    for (int r = 0; r < 3; ++r) {
      shape_demand_.push_back(m[r]);
      shape_demand_eps_.push_back(m[r] - EPS);
    }
    shape_k_.push_back(gang_[i]);
    shape_te_.push_back(class_[i] == 0);
  }
  int n_shapes = static_cast<int>(shape_k_.size());
  queues_.resize(n_shapes);
  blocked_.init(n_shapes);
  nonempty_.init(n_shapes);
  unknown_.init(n_shapes);
  declined_.init(n_shapes);
  owed_.init(n_shapes);

  state_.assign(n_jobs, NOT_SUBMITTED);
  remaining_ = duration_;
  run_start_.assign(n_jobs, NaN);
  run_overhead_.assign(n_jobs, 0.0);
  first_start_.assign(n_jobs, NaN);
  completion_.assign(n_jobs, NaN);
  grace_time_.assign(n_jobs, 0.0);
  overhead_time_.assign(n_jobs, 0.0);
  run_time_.assign(n_jobs, 0.0);
  preemptions_.assign(n_jobs, 0);
  epoch_.assign(n_jobs, 0);
  preempted_for_.assign(n_jobs, -1);
  n_placed_.assign(n_jobs, 0);
  node_buf_.assign(total_nodes, -1);
  owed_buf_.assign(3 * total_nodes, 0.0);
  has_owed_.assign(n_jobs, 0);

  // The Python engine pushes one ARRIVE per job, in job order (seq = index): they pop by (submit, index).
  arrivals_.resize(n_jobs);
  for (int i = 0; i < n_jobs; ++i) arrivals_[i] = i;
  std::stable_sort(arrivals_.begin(), arrivals_.end(), [&](int a, int b) { return submit_[a] < submit_[b]; });
  seq_ = n_jobs;
}

// ==================================================================== driving interface

int Engine::advance(double until) {
  if (request_ >= 0) throw std::logic_error("advance() called while a decision is pending; call resolve() first");
  while (true) {
    if (in_pass_) {
      int job = schedule_pass();
      if (job >= 0) {
        request_ = job;
        ++n_requests_;
        return job;
      }
      in_pass_ = false;
    }
    if (!has_events() || next_event_time() > until) return -1;
    process_events_at(next_event_time());
    in_pass_ = true;
  }
}

void Engine::resolve(const std::vector<int64_t>& nodes, const std::vector<int64_t>& victims) {
  int job = request_;
  if (job < 0) throw std::logic_error("resolve() called with no decision pending");
  if (nodes.empty()) {
    if (!victims.empty())
      throw std::invalid_argument("A plan with victims " + py_list(victims, /*tuple=*/true) +
                                  " must name the nodes to use");
    owed_.discard(shape_[job]);
    declined_.add(shape_[job]);
  } else {
    check_plan(job, nodes, victims);
    apply_plan(job, nodes, victims);
  }
  request_ = -1;
}

void Engine::run_declining(double until) {
  while (advance(until) >= 0) resolve({}, {});
}

std::vector<std::pair<int, std::vector<int>>> Engine::candidates() const {
  std::vector<std::pair<int, std::vector<int>>> out;
  for (int n = 0; n < n_nodes_; ++n) {
    if (cand_on_[n].empty()) continue;
    std::vector<int> c = cand_on_[n];
    std::sort(c.begin(), c.end());
    out.emplace_back(n, std::move(c));
  }
  return out;
}

std::vector<int> Engine::running_on(int node) const {
  if (node < 0 || node >= n_nodes_) throw std::out_of_range("node index out of range");
  std::vector<int> r = running_on_[node];
  std::sort(r.begin(), r.end());
  return r;
}

std::vector<int> Engine::job_nodes(int job) const {
  if (job < 0 || job >= n_jobs_) throw std::out_of_range("job index out of range");
  const int* p = nodes_of(job);
  return std::vector<int>(p, p + n_placed_[job]);
}

// ==================================================================== events

void Engine::push(double time, Kind kind, int job, int64_t epoch) {
  events_.push_back(Event{time, kind, job, seq_++, epoch});
  std::push_heap(events_.begin(), events_.end(), EventAfter{});
}

bool Engine::has_events() const { return next_arrival_ < arrivals_.size() || !events_.empty(); }

double Engine::next_event_time() const {
  double t = std::numeric_limits<double>::infinity();
  if (next_arrival_ < arrivals_.size()) t = submit_[arrivals_[next_arrival_]];
  if (!events_.empty() && events_.front().time < t) t = events_.front().time;
  return t;
}

Engine::Event Engine::pop_event() {
  // A heap event (COMPLETE or RELEASE) goes before an arrival at the same time: its kind is smaller.
  if (!events_.empty() &&
      (next_arrival_ >= arrivals_.size() || events_.front().time <= submit_[arrivals_[next_arrival_]])) {
    std::pop_heap(events_.begin(), events_.end(), EventAfter{});
    Event e = events_.back();
    events_.pop_back();
    return e;
  }
  int i = arrivals_[next_arrival_++];
  return Event{submit_[i], ARRIVE, i, static_cast<int64_t>(i), 0};
}

void Engine::process_events_at(double t) {
  double dt = t - now_;
  if (dt > 0) {
    accrued_[0] += rate_[0] * dt;
    accrued_[1] += rate_[1] * dt;
    accrued_bounded_[0] += rate_bounded_[0] * dt;
    accrued_bounded_[1] += rate_bounded_[1] * dt;
  }
  now_ = t;
  while (has_events() && next_event_time() == t) {
    Event ev = pop_event();
    int job = ev.job;
    int c = class_[job];
    if (ev.kind == ARRIVE) {
      state_[job] = PENDING;
      enqueue(job);
      rate_[c] += inv_duration_[job];
      rate_bounded_[c] += inv_bounded_[job];
    } else if (ev.kind == COMPLETE) {
      if (ev.epoch != epoch_[job]) continue;  // the run this event belonged to was preempted
      close_segment(job, t, /*completed=*/true);
      release(job);
      state_[job] = COMPLETED;
      remaining_[job] = 0.0;
      completion_[job] = t;
      ++n_done_;
      rate_[c] -= inv_duration_[job];
      rate_bounded_[c] -= inv_bounded_[job];
    } else {  // RELEASE: grace period over
      release(job);
      state_[job] = PENDING;
      n_placed_[job] = 0;
      enqueue(job);
    }
  }
}

void Engine::enqueue(int job) {
  int s = shape_[job];
  std::vector<int>& q = queues_[s];
  q.push_back(job);
  std::push_heap(q.begin(), q.end(), [this](int a, int b) { return shape_q_after(a, b); });
  nonempty_.add(s);
  if (!blocked_.has(s)) unknown_.add(s);
  if (shape_te_[s]) {
    ++n_te_queued_;
    if (!declined_.has(s)) owed_.add(s);
  } else {
    ++n_be_queued_;
  }
}

void Engine::release(int job) {
  const double* m = member_row(job);
  const int* nodes = nodes_of(job);
  int k = n_placed_[job];
  for (int p = 0; p < k; ++p) {
    int n = nodes[p];
    discard(running_on_[n], job);
    discard(cand_on_[n], job);
    if (!res_on_[n].empty()) {
      hand_over(job, n);
    } else {
      double* a = avail_row(n);
      a[0] += m[0];
      a[1] += m[1];
      a[2] += m[2];
    }
  }
  preempted_for_[job] = -1;
  if (!declined_.empty()) offer_again(nodes, k);
  if (!blocked_.empty()) {
    // Only these nodes gained room, so a blocked shape can fit now only if it fits on one of them. Walked
    // backwards: discarding swaps the last item (already visited) into the current slot.
    const std::vector<int>& items = blocked_.items();
    for (size_t i = items.size(); i-- > 0;) {
      int s = items[i];
      for (int p = 0; p < k; ++p) {
        if (fits(nodes[p], s)) {
          blocked_.discard(s);
          if (nonempty_.has(s)) unknown_.add(s);
          break;
        }
      }
    }
  }
}

void Engine::hand_over(int job, int n) {
  // What `job` releases on node n goes to the reservations there: first the TE job it was preempted for,
  // then the others oldest first; what nobody is owed becomes available.
  const double* m = member_row(job);
  double give[3] = {m[0], m[1], m[2]};
  std::vector<int> waiting = res_on_[n];
  int first = preempted_for_[job];
  auto it = std::find(waiting.begin(), waiting.end(), first);
  if (first >= 0 && it != waiting.end()) {
    // [first] + [r for r in waiting if r != first]; a job is reserved on a node at most once.
    waiting.erase(it);
    waiting.insert(waiting.begin(), first);
  }
  double* h = held_row(n);
  for (int r : waiting) {
    const int* rn = nodes_of(r);
    int pos = static_cast<int>(std::find(rn, rn + n_placed_[r], n) - rn);
    double* owed = owed_of(r) + 3 * pos;
    for (int x = 0; x < 3; ++x) {
      double g = np_minimum(give[x], owed[x]);
      owed[x] -= g;
      give[x] -= g;
      h[x] += g;
    }
  }
  double* a = avail_row(n);
  a[0] += give[0];
  a[1] += give[1];
  a[2] += give[2];
}

void Engine::offer_again(const int* nodes, int k) {
  // These nodes gained resources or a preemption candidate: a declined TE shape is owed an offer again if it
  // could now fit on one of them after preemptions (Python: _offer_again).
  for (int p = 0; p < k; ++p) {
    int n = nodes[p];
    const double* a = avail_row(n);
    // Summed in job order, as the baselines' freed() sums a request's sorted candidates.
    std::vector<int>& cands = scratch_cands_;
    cands.assign(cand_on_[n].begin(), cand_on_[n].end());
    std::sort(cands.begin(), cands.end());
    double freed[3] = {0.0, 0.0, 0.0};
    for (int c : cands) {
      const double* d = member_row(c);
      freed[0] += d[0];
      freed[1] += d[1];
      freed[2] += d[2];
    }
    const std::vector<int>& items = declined_.items();
    for (size_t i = items.size(); i-- > 0;) {  // backwards: discarding swaps a visited item into slot i
      int s = items[i];
      // The baselines' feasibility test (NodeByNodeRule::decide): the candidates cover the shortfall.
      double missing[3];
      shortfall(a, &shape_demand_[3 * static_cast<size_t>(s)], missing);
      if (covers(freed, missing)) {
        declined_.discard(s);
        owed_.add(s);
      }
    }
  }
}

void Engine::dequeued(int job) {
  int s = shape_[job];
  if (queues_[s].empty()) {
    nonempty_.discard(s);
    unknown_.discard(s);
    declined_.discard(s);  // a decline is about the jobs queued now
    owed_.discard(s);
  }
  if (shape_te_[s]) {
    --n_te_queued_;
  } else {
    --n_be_queued_;
  }
}

// ==================================================================== scheduling pass

int Engine::schedule_pass() {
  // Start what can start, in queue order; return the TE job that needs a decision, or -1.
  if (!reserved_.empty()) start_ready_reservations();
  const bool backfill = config_.backfill;
  const bool offer_te = config_.preemption;
  const bool offers_owed = offer_te && !owed_.empty();
  if (unknown_.empty() && backfill && !offers_owed) return -1;  // nothing can start, nobody is owed an offer

  // Classify every shape not known to be blocked (Python: the fit matrix). Python keeps the matrix and
  // patches it after each start; here a shape's fit is recomputed when its turn comes (place()), from the
  // same avail, so it is the same test on the same numbers.
  std::vector<int>& placeable_shapes = scratch_placeable_;
  std::vector<int>& newly = scratch_newly_;
  placeable_shapes.clear();
  newly.clear();
  for (int s : unknown_.items()) (placeable(s) ? placeable_shapes : newly).push_back(s);
  for (int s : newly) {
    blocked_.add(s);
    unknown_.discard(s);
  }

  // The shapes to walk, as a heap by the queue key of their head job. Python builds it from a set; the
  // order it is built in does not matter, since queue keys are unique (they end with the job index).
  std::vector<PassEntry>& heap = pass_heap_;
  heap.clear();
  if (!backfill) {
    for (int s : nonempty_.items()) heap.push_back({queues_[s].front(), s});  // blocked shapes block too
  } else if (offers_owed) {
    for (int s : nonempty_.items())
      if (!blocked_.has(s) || (shape_te_[s] && !declined_.has(s))) heap.push_back({queues_[s].front(), s});
  } else {
    for (int s : placeable_shapes) heap.push_back({queues_[s].front(), s});
  }
  if (heap.empty()) return -1;
  auto after = [this](const PassEntry& a, const PassEntry& b) { return queue_less(b.job, a.job); };
  auto q_after = [this](int a, int b) { return shape_q_after(a, b); };
  std::make_heap(heap.begin(), heap.end(), after);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), after);
    int s = heap.back().shape;
    heap.pop_back();
    std::vector<int>& q = queues_[s];
    int job = q.front();
    if (!blocked_.has(s)) {
      if (place(job, scratch_nodes_)) {
        std::pop_heap(q.begin(), q.end(), q_after);
        q.pop_back();
        dequeued(job);
        start(job, scratch_nodes_.data(), /*reserved=*/false);
        if (!q.empty()) {
          heap.push_back({q.front(), s});
          std::push_heap(heap.begin(), heap.end(), after);
        }
        continue;
      }
      blocked_.add(s);
      unknown_.discard(s);
    }
    // The head of this shape cannot be placed; the jobs behind it cannot either.
    if (offer_te && shape_te_[s] && !declined_.has(s)) return job;
    if (!backfill) return -1;  // strict head-of-line blocking
  }
  return -1;
}

bool Engine::placeable(int shape) const {
  // Python: fit.sum(axis=1) >= k for the shape's row of the fit matrix.
  int need = shape_k_[shape], have = 0;
  for (int n = 0; n < n_nodes_; ++n)
    if (fits(n, shape) && ++have >= need) return true;
  return false;
}

bool Engine::place(int job, std::vector<int>& nodes) {
  // Nodes for the job, or false if fewer than k fit.
  int s = shape_[job];
  size_t k = static_cast<size_t>(shape_k_[s]);
  std::vector<int>& fit = nodes;  // the fitting nodes, then the chosen ones
  fit.clear();
  for (int n = 0; n < n_nodes_; ++n)
    if (fits(n, s)) fit.push_back(n);
  if (fit.size() < k) return false;
  if (config_.first_fit || fit.size() == k) {
    fit.resize(k);
    return true;
  }
  // Best fit: least leftover GPUs, then CPUs, then memory, then node order, with the leftover rounded to 9
  // decimals (so that float noise does not break ties meant for node order). Python's k == 1 shortcut
  // (min over rows, the first of equals) gives the same node as its lexsort, and as this.
  const double* m = member_row(job);
  std::vector<Left>& left = scratch_left_;
  left.clear();
  for (int n : fit) {
    const double* a = avail_row(n);
    left.push_back({round9(a[0] - m[0]), round9(a[1] - m[1]), round9(a[2] - m[2]), n});
  }
  auto less = [](const Left& x, const Left& y) {
    return std::tie(x.g, x.c, x.mem, x.node) < std::tie(y.g, y.c, y.mem, y.node);
  };
  if (k == 1) {
    fit.assign(1, std::min_element(left.begin(), left.end(), less)->node);
    return true;
  }
  std::partial_sort(left.begin(), left.begin() + k, left.end(), less);
  fit.clear();
  for (size_t i = 0; i < k; ++i) fit.push_back(left[i].node);
  return true;
}

void Engine::start(int job, const int* nodes, bool reserved) {
  const double* m = member_row(job);
  int k = gang_[job];
  int* jn = nodes_of(job);
  if (jn != nodes) std::copy(nodes, nodes + k, jn);
  for (int p = 0; p < k; ++p) {
    int n = jn[p];
    double* a = avail_row(n);
    if (reserved) {  // its resources were set aside in held
      const double* owed = owed_of(job) + 3 * p;
      double* h = held_row(n);
      for (int x = 0; x < 3; ++x) {
        h[x] -= m[x] - owed[x];
        a[x] -= owed[x];  // at most float noise: a job starts when nothing is owed
      }
    } else {
      a[0] -= m[0];
      a[1] -= m[1];
      a[2] -= m[2];
    }
    running_on_[n].push_back(job);
  }
  const bool candidate = class_[job] == 1 && preemptions_[job] < config_.max_preemptions;
  if (candidate)
    for (int p = 0; p < k; ++p) cand_on_[jn[p]].push_back(job);
  n_placed_[job] = k;
  state_[job] = RUNNING;
  run_start_[job] = now_;
  run_overhead_[job] = preemptions_[job] ? restart_[job] : 0.0;
  if (std::isnan(first_start_[job])) first_start_[job] = now_;
  ++epoch_[job];
  push(now_ + run_overhead_[job] + remaining_[job], COMPLETE, job, epoch_[job]);
  if (candidate && !declined_.empty()) offer_again(jn, k);  // a new preemption candidate
}

void Engine::start_ready_reservations() {
  size_t kept = 0;
  for (size_t i = 0; i < reserved_.size(); ++i) {
    int job = reserved_[i];
    const double* owed = owed_of(job);
    int k = n_placed_[job];
    bool ready = true;
    for (int x = 0; x < 3 * k; ++x) ready = ready && owed[x] <= EPS;
    if (ready) {
      const int* nodes = nodes_of(job);
      for (int p = 0; p < k; ++p) remove_first(res_on_[nodes[p]], job);
      start(job, nodes, /*reserved=*/true);
      has_owed_[job] = 0;
    } else {
      reserved_[kept++] = job;
    }
  }
  reserved_.resize(kept);
}

void Engine::close_segment(int job, double end, bool completed) {
  double start = run_start_[job];
  double length = end - start;
  run_time_[job] += length;
  overhead_time_[job] += py_min(run_overhead_[job], length);
  const int* nodes = nodes_of(job);
  for (int p = 0; p < n_placed_[job]; ++p) {
    segments_.job.push_back(job);
    segments_.node.push_back(nodes[p]);
    segments_.start.push_back(start);
    segments_.end.push_back(end);
    segments_.completed.push_back(completed);
  }
}

// ==================================================================== preemption

void Engine::check_plan(int job, const std::vector<int64_t>& nodes, const std::vector<int64_t>& victims) const {
  size_t k = static_cast<size_t>(gang_[job]);
  std::vector<int64_t> distinct(nodes);
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  if (nodes.size() != k || distinct.size() != k)
    throw std::invalid_argument("Job " + label(job) + " needs " + std::to_string(k) +
                                " distinct node(s); the plan names nodes " + py_list(nodes));
  for (int64_t n : nodes)
    if (n < 0 || n >= n_nodes_)
      throw std::invalid_argument("Plan node " + std::to_string(n) + " is not a node index in [0, " +
                                  std::to_string(n_nodes_) + ")");
  std::vector<int64_t> vs(victims);
  std::sort(vs.begin(), vs.end());
  if (std::adjacent_find(vs.begin(), vs.end()) != vs.end())
    throw std::invalid_argument("Plan names a victim more than once: " + py_list(victims));
  std::vector<int> legal;
  for (const auto& c : cand_on_) legal.insert(legal.end(), c.begin(), c.end());
  std::sort(legal.begin(), legal.end());
  legal.erase(std::unique(legal.begin(), legal.end()), legal.end());
  for (int64_t v : victims)
    if (!std::binary_search(legal.begin(), legal.end(), v))
      throw std::invalid_argument("Job index " + std::to_string(v) + " is not a preemption candidate for " +
                                  label(job) + "; candidates are " + py_list(legal));
  // What each chosen node would offer once the victims are gone, added in the plan's victim order.
  std::vector<double> room(3 * k);
  for (size_t p = 0; p < k; ++p)
    for (int x = 0; x < 3; ++x) room[3 * p + x] = avail_[3 * nodes[p] + x];
  for (int64_t v : victims) {
    const int* vn = nodes_of(static_cast<int>(v));
    const double* vm = member_row(static_cast<int>(v));
    for (int q = 0; q < n_placed_[v]; ++q) {
      auto it = std::find(nodes.begin(), nodes.end(), vn[q]);
      if (it == nodes.end()) continue;
      double* r = &room[3 * (it - nodes.begin())];
      for (int x = 0; x < 3; ++x) r[x] += vm[x];
    }
  }
  const double* m = member_row(job);
  for (size_t p = 0; p < k; ++p) {
    const double* r = &room[3 * p];
    if (!covers(r, m))
      throw std::invalid_argument("After preempting " + py_list(victims) + ", node " + std::to_string(nodes[p]) +
                                  " would offer " + py_row(r) + " but job " + label(job) + " needs " + py_row(m) +
                                  " there");
  }
}

void Engine::apply_plan(int job, const std::vector<int64_t>& nodes, const std::vector<int64_t>& victims) {
  // Take the job out of its queue; on each chosen node set aside what is free now (up to its demand), and
  // record what the victims still owe it.
  std::vector<int>& q = queues_[shape_[job]];
  remove_first(q, job);
  std::make_heap(q.begin(), q.end(), [this](int a, int b) { return shape_q_after(a, b); });
  dequeued(job);
  const double* m = member_row(job);
  int k = gang_[job];
  int* jn = nodes_of(job);
  double* owed = owed_of(job);
  for (int p = 0; p < k; ++p) {
    int n = static_cast<int>(nodes[p]);
    double* a = avail_row(n);
    double* h = held_row(n);
    for (int x = 0; x < 3; ++x) {
      double take = np_minimum(np_maximum(a[x], 0.0), m[x]);
      a[x] -= take;
      h[x] += take;
      owed[3 * p + x] = m[x] - take;
    }
    res_on_[n].push_back(job);
    jn[p] = n;
  }
  has_owed_[job] = 1;
  n_placed_[job] = k;
  reserved_.push_back(job);
  for (int64_t v : victims) {
    preempt(static_cast<int>(v));
    preempted_for_[v] = job;
  }
}

void Engine::preempt(int victim) {
  const int* nodes = nodes_of(victim);
  for (int p = 0; p < n_placed_[victim]; ++p) discard(cand_on_[nodes[p]], victim);
  close_segment(victim, now_, /*completed=*/false);
  double progress = py_max(0.0, now_ - run_start_[victim] - run_overhead_[victim]);
  remaining_[victim] = py_max(0.0, remaining_[victim] - progress);
  ++epoch_[victim];  // its completion event is now stale
  ++preemptions_[victim];
  state_[victim] = PREEMPTING;
  grace_time_[victim] += grace_[victim];
  ++n_preemptions_;
  push(now_ + grace_[victim], RELEASE, victim, epoch_[victim]);
}

// ==================================================================== helpers

bool Engine::fits(int n, int shape) const {
  const double* a = &avail_[3 * static_cast<size_t>(n)];
  const double* d = &shape_demand_eps_[3 * static_cast<size_t>(shape)];
  return a[0] >= d[0] && a[1] >= d[1] && a[2] >= d[2];
}

std::pair<std::vector<int>, std::vector<int>> Engine::queued(int64_t limit) const {
  // Per class, a best-first walk of that class's shape heaps (jobs of one shape share their class): a frontier
  // heap holds the heap nodes whose parents have been taken, starting from every shape's root, and taking the
  // oldest of it (and adding its two children, at 2p+1 and 2p+2 as in every std:: heap) yields the class's
  // jobs in queue order. O(shapes + limit * log(shapes + limit)) per class; the rest of the queues is not read.
  struct Entry {
    int job, shape;
    size_t pos;
  };
  std::pair<std::vector<int>, std::vector<int>> out;
  if (limit <= 0) return out;
  std::vector<Entry> frontier[2];
  for (int s : nonempty_.items()) frontier[shape_te_[s] ? 0 : 1].push_back({queues_[s].front(), s, 0});
  auto after = [this](const Entry& a, const Entry& b) { return shape_q_after(a.job, b.job); };
  for (int c = 0; c < 2; ++c) {
    std::vector<Entry>& f = frontier[c];
    std::vector<int>& taken = c == 0 ? out.first : out.second;
    std::make_heap(f.begin(), f.end(), after);
    while (!f.empty() && static_cast<int64_t>(taken.size()) < limit) {
      std::pop_heap(f.begin(), f.end(), after);
      Entry e = f.back();
      f.pop_back();
      taken.push_back(e.job);
      const std::vector<int>& q = queues_[e.shape];
      for (size_t child = 2 * e.pos + 1; child <= 2 * e.pos + 2 && child < q.size(); ++child) {
        f.push_back({q[child], e.shape, child});
        std::push_heap(f.begin(), f.end(), after);
      }
    }
  }
  return out;
}

bool Engine::queue_less(int a, int b) const {
  // The Python queue key: (class, submit, index) for the priority queue, (submit, index) for fifo.
  if (config_.priority_queue && class_[a] != class_[b]) return class_[a] < class_[b];
  if (submit_[a] != submit_[b]) return submit_[a] < submit_[b];
  return a < b;
}

bool Engine::shape_q_after(int a, int b) const {
  // Jobs of one shape share their class, so (submit, index) orders them under either discipline.
  if (submit_[a] != submit_[b]) return submit_[a] > submit_[b];
  return a > b;
}

std::string Engine::label(int job) const { return job_label(job); }

// ---------------------------------------------------------------------------------------------- native rules

int64_t Engine::run_rule(Rule& rule, double until, int64_t max_decisions) {
  RequestView view;
  view.n_nodes = n_nodes_;
  view.capacity = capacity_.data();
  std::vector<int64_t> nodes, victims;
  for (int64_t made = 0;; ++made) {
    if (max_decisions >= 0 && made >= max_decisions) return made;
    const int job = advance(until);
    if (job < 0) return made;
    view.job = job;
    const double* m = member_row(job);
    view.member[0] = m[0];
    view.member[1] = m[1];
    view.member[2] = m[2];
    view.gang = gang_[job];
    view.avail = avail_.data();
    view.candidates.clear();
    for (const auto& entry : candidates()) {  // nodes ascending, candidates by index, as in the request
      std::vector<Candidate> cands;
      cands.reserve(entry.second.size());
      for (int c : entry.second) {
        const double* d = member_row(c);
        cands.push_back(Candidate{c, {d[0], d[1], d[2]}, gang_[c], grace_[c], run_start_[c]});
      }
      view.candidates.emplace_back(entry.first, std::move(cands));
    }
    Plan plan = rule.decide(view);
    nodes.assign(plan.nodes.begin(), plan.nodes.end());
    victims.assign(plan.victims.begin(), plan.victims.end());
    resolve(nodes, victims);  // checked like any plan: a rule's bug cannot corrupt the state
  }
}

}  // namespace schedgym
