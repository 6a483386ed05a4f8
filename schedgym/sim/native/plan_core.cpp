// The plan-level decision protocol on the native engine; see plan_core.hpp. Function names follow
// schedgym/decision/plans.py, plan_mode.py and scalefree.py; comments name the Python expression a line stands
// for where the correspondence is not obvious.
//
// Floating point: every value is computed as the Python computes it, operation by operation in float64 (the
// build forbids contraction and reassociation, see CMakeLists.txt), rounded to float32 as numpy does when the
// list is assigned into the float32 array, then clipped as np.clip does. Python's ints are exact here (counts
// far below 2**53), and int / int is the correctly rounded quotient, as double / double is.
#include "plan_core.hpp"

#include "resources.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

namespace schedgym {

namespace {

// scalefree.ratio: x / (x + unit), 0 for x <= 0.
inline double ratio(double x, double unit) { return x > 0 ? x / (x + unit) : 0.0; }
// float64 -> float32 (numpy's assignment of a Python float), then np.clip(x, 0, 1) on float32.
inline float clip01(double v) {
  float x = static_cast<float>(v);
  if (!std::isnan(x)) x = (x > 0.0f) ? x : 0.0f;
  if (!std::isnan(x)) x = (x < 1.0f) ? x : 1.0f;
  return x;
}

// Python compares the tuples (a0, a1, a2) < (b0, b1, b2): at the first position whose elements differ (==).
inline bool less3(const double* a, const double* b) {
  for (int i = 0; i < 3; ++i)
    if (!(a[i] == b[i])) return a[i] < b[i];
  return false;
}

void sorted_unique(const std::vector<int>& in, std::vector<int>& out) {
  out.assign(in.begin(), in.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

}  // namespace

std::vector<std::string> plan_head_names() {
  return {"gpus",          "cpus",          "mem_gb",         "gang",          "wait",          "estimate",
          "victims_chosen", "continuing",   "missing_gpus",   "missing_cpus",  "missing_mem_gb", "unused_gpus",
          "unused_cpus",   "unused_mem_gb", "reserved_gpus",  "reserved_cpus", "reserved_mem_gb", "queued_te",
          "queued_be",     "running_be",    "te_scale"};
}

std::vector<std::string> plan_queue_names() {
  return {"valid", "is_te", "gang", "gpus", "cpus", "mem_gb", "wait", "estimate", "slowdown", "preemptions",
          "fits_now"};
}

std::vector<std::string> plan_row_names(const std::vector<std::string>& rules) {
  std::vector<std::string> out = {"valid", "wait"};
  for (const std::string& r : rules) out.push_back("by_" + r);
  for (const char* name : {"per_node", "victims", "gang_victims", "nodes_touched", "freed_gpus", "freed_cpus",
                           "freed_mem_gb", "surplus_gpus", "start_delay", "remaining", "remaining_vs_te", "elapsed",
                           "preemptions", "last_chance", "starts_te", "starts_be", "unused_gpus_after",
                           "fragmentation_after"})
    out.push_back(name);
  return out;
}

PlanCore::PlanCore(Engine* engine, std::vector<std::unique_ptr<Rule>> rules, int max_plans, int queue_rows,
                   std::vector<double> estimate, const double* scale, const double* total, RunningMedians medians,
                   int max_subset, bool compensated_sum)
    : engine_(engine),
      rules_(std::move(rules)),
      max_plans_(max_plans),
      queue_rows_(queue_rows),
      max_subset_(max_subset),
      compensated_(compensated_sum),
      estimate_(std::move(estimate)),
      medians_(std::move(medians)) {
  if (engine_ == nullptr) throw std::invalid_argument("PlanCore needs an engine");
  if (max_plans < 2) throw std::invalid_argument("Expected max_plans >= 2, got " + std::to_string(max_plans));
  if (queue_rows < 0) throw std::invalid_argument("Expected queue_rows >= 0, got " + std::to_string(queue_rows));
  if (rules_.size() > 30) throw std::invalid_argument("Expected at most 30 rules");
  for (const auto& r : rules_)
    if (!r) throw std::invalid_argument("PlanCore: a rule is missing");
  if (max_subset < 0 || max_subset > 30)
    throw std::invalid_argument("Expected 0 <= max_subset <= 30, got " + std::to_string(max_subset));
  if (estimate_.size() != static_cast<size_t>(engine_->n_jobs()))
    throw std::invalid_argument("Expected one estimate factor per job (" + std::to_string(engine_->n_jobs()) +
                                "), got " + std::to_string(estimate_.size()));
  for (int c = 0; c < 2; ++c) {
    if (medians_.submit[c].size() != medians_.median[c].size())
      throw std::invalid_argument("Expected as many running medians as submit times");
    if (!std::is_sorted(medians_.submit[c].begin(), medians_.submit[c].end()))
      throw std::invalid_argument("Expected the submit times of the running medians in ascending order");
  }
  for (int r = 0; r < 3; ++r) {
    scale_[r] = scale[r];
    total_[r] = total[r];
  }
  n_nodes_ = engine_->n_nodes();
  seen_.assign(engine_->n_jobs(), 0);
  view_.n_nodes = n_nodes_;
}

// ==================================================================== driving

bool PlanCore::next_decision() {
  int job;
  while ((job = engine_->advance()) >= 0) {
    begin(job);
    if (n_options_ > 1) {
      ++n_offered_;
      return true;
    }
    resolve({}, {});  // waiting is the only option: declined without asking
  }
  end();
  return false;
}

int PlanCore::choose(int action) {
  if (job_ < 0) throw std::logic_error("choose() called with no decision pending");
  if (action < 0 || static_cast<size_t>(action) >= n_options_)
    throw std::out_of_range("Action " + std::to_string(action) + " is illegal in this decision; legal actions are 0.." +
                            std::to_string(n_options_ - 1));
  // Copied: resolve() ends the decision, which clears the options.
  per_node_ = options_[static_cast<size_t>(action)].plan;
  const int n = static_cast<int>(per_node_.victims.size());
  resolve(per_node_.nodes, per_node_.victims);
  return n;
}

bool PlanCore::attach() {
  int job = engine_->pending();
  if (job < 0) {
    end();
    return false;
  }
  begin(job);
  return true;
}

std::vector<int64_t> PlanCore::take_log() {
  std::vector<int64_t> out;
  out.swap(log_);
  return out;
}

void PlanCore::end() {
  job_ = -1;
  n_options_ = 0;  // the options' storage is kept for the next request
}

void PlanCore::resolve(const std::vector<int>& nodes, const std::vector<int>& victims) {
  if (engine_->pending() != job_)
    throw std::logic_error("the simulation was advanced or resolved outside this decision");
  nodes64_.assign(nodes.begin(), nodes.end());
  victims64_.assign(victims.begin(), victims.end());
  engine_->resolve(nodes64_, victims64_);
  log_.push_back(static_cast<int64_t>(nodes.size()));
  log_.push_back(static_cast<int64_t>(victims.size()));
  log_.insert(log_.end(), nodes.begin(), nodes.end());
  log_.insert(log_.end(), victims.begin(), victims.end());
  end();
}

// ==================================================================== the options (plans.plan_options)

void PlanCore::begin(int job) {
  end();
  job_ = job;
  const Engine& e = *engine_;
  // The request as a rule sees it (Engine::run_rule builds the same view): nodes ascending, candidates by index.
  view_.job = job;
  const double* m = e.member(job);
  view_.member[0] = m[0];
  view_.member[1] = m[1];
  view_.member[2] = m[2];
  view_.gang = e.gang(job);
  view_.avail = e.avail().data();
  view_.capacity = e.capacity().data();
  // The candidate lists are kept from one request to the next (moved to spare_ and back), not reallocated.
  for (auto& entry : view_.candidates) spare_.push_back(std::move(entry.second));
  view_.candidates.clear();
  n_be_ = 0;
  for (int n = 0; n < n_nodes_; ++n) {
    const std::vector<int>& on = e.candidates_on(n);
    if (on.empty()) continue;
    std::vector<int>& ids = ids_;
    ids.assign(on.begin(), on.end());
    std::sort(ids.begin(), ids.end());
    std::vector<Candidate> cands;
    if (!spare_.empty()) {
      cands = std::move(spare_.back());
      spare_.pop_back();
      cands.clear();
    }
    for (int c : ids) {
      const double* d = e.member(c);
      cands.push_back(Candidate{c, {d[0], d[1], d[2]}, e.gang(c), e.grace(c), e.run_start()[c]});
      if (!seen_[c]) {
        seen_[c] = 1;
        ++n_be_;
      }
    }
    view_.candidates.emplace_back(n, std::move(cands));
  }
  for (const auto& entry : view_.candidates)
    for (const Candidate& c : entry.second) seen_[c.idx] = 0;

  // Wait, then each rule's plan, then (a job of one node) the fewest victims of each node, in node order.
  if (options_.empty()) options_.emplace_back();
  options_[0].plan.nodes.clear();
  options_[0].plan.victims.clear();
  options_[0].key_nodes.clear();
  options_[0].key_victims.clear();
  options_[0].sources = 1u;
  n_options_ = 1;
  for (size_t r = 0; r < rules_.size(); ++r) add(rules_[r]->decide(view_), 1u << (1 + r));
  if (view_.gang == 1) {
    const uint32_t per_node = 1u << (1 + rules_.size());
    const double* avail = view_.avail;
    for (const auto& entry : view_.candidates) {
      const int n = entry.first;
      const double* a = avail + 3 * static_cast<size_t>(n);
      if (covers(a, view_.member)) continue;
      // Options beyond max_plans are cut: once they are full, a node's plan matters only if it is already
      // among them (proposed by a rule on this node alone), where it adds its flag.
      if (n_options_ >= static_cast<size_t>(max_plans_)) {
        bool listed = false;
        for (size_t i = 0; i < n_options_; ++i)
          listed = listed || (options_[i].key_nodes.size() == 1 && options_[i].key_nodes[0] == n);
        if (!listed) continue;
      }
      double deficit[3];
      shortfall(a, view_.member, deficit);
      per_node_.nodes.assign(1, n);
      if (fewest_victims(deficit, entry.second, per_node_.victims)) add(per_node_, per_node);
    }
  }
  if (n_options_ > static_cast<size_t>(max_plans_)) n_options_ = static_cast<size_t>(max_plans_);
}

void PlanCore::add(const Plan& plan, uint32_t source) {
  // plans.plan_options.add: a plan listed already (as sets of nodes and victims) gains the source's flag.
  sorted_unique(plan.nodes, key_nodes_);
  sorted_unique(plan.victims, key_victims_);
  for (size_t i = 0; i < n_options_; ++i) {
    PlanChoice& o = options_[i];
    if (o.key_nodes == key_nodes_ && o.key_victims == key_victims_) {
      o.sources |= source;
      return;
    }
  }
  if (n_options_ == options_.size()) options_.emplace_back();
  PlanChoice& slot = options_[n_options_++];
  slot.plan.nodes.assign(plan.nodes.begin(), plan.nodes.end());
  slot.plan.victims.assign(plan.victims.begin(), plan.victims.end());
  slot.key_nodes.swap(key_nodes_);
  slot.key_victims.swap(key_victims_);
  slot.sources = source;
}

bool PlanCore::fewest_victims(const double deficit[3], const std::vector<Candidate>& cands, std::vector<int>& out) {
  // plans.fewest_victims: the fewest candidates whose demands cover the deficit; ties to the shorter longest grace
  // period, then to the lower job indices (the first subset in lexicographic order, as itertools.combinations
  // lists them: candidates are by job index).
  const int n = static_cast<int>(cands.size());
  if (n > max_subset_) return false;
  double g = 0.0, c = 0.0, m = 0.0;  // resources.total_demand
  for (const Candidate& v : cands) {
    g += v.demand[0];
    c += v.demand[1];
    m += v.demand[2];
  }
  if (!covers3(g, c, m, deficit)) return false;
  for (int size = 1; size <= n; ++size) {
    subset_.resize(static_cast<size_t>(size));
    for (int i = 0; i < size; ++i) subset_[i] = i;
    bool found = false;
    double best_grace = 0.0;
    while (true) {
      double sg = 0.0, sc = 0.0, sm = 0.0;
      for (int p : subset_) {
        sg += cands[p].demand[0];
        sc += cands[p].demand[1];
        sm += cands[p].demand[2];
      }
      if (covers3(sg, sc, sm, deficit)) {
        double grace = cands[subset_[0]].grace;  // max(): the first maximal one
        for (size_t i = 1; i < subset_.size(); ++i)
          if (cands[subset_[i]].grace > grace) grace = cands[subset_[i]].grace;
        // key < best: a later subset has larger indices, so only a strictly shorter grace period wins.
        if (!found || grace < best_grace) {
          found = true;
          best_grace = grace;
          best_ = subset_;
        }
      }
      int i = size - 1;
      while (i >= 0 && subset_[i] == n - size + i) --i;
      if (i < 0) break;
      ++subset_[i];
      for (int j = i + 1; j < size; ++j) subset_[j] = subset_[j - 1] + 1;
    }
    if (found) {
      out.clear();
      for (int p : best_) out.push_back(cands[p].idx);
      return true;
    }
  }
  return false;  // not reached: all candidates together cover the deficit
}

// ==================================================================== the observation (scalefree.py)

double py_sum(const double* x, size_t n, bool compensated) {
  // sum(floats) from its int start 0: 0 + x[0], then each item added; CPython >= 3.12 compensates the additions
  // after the first (Neumaier), as builtin_sum_impl does, and adds the compensation at the end if it is finite
  // and not zero.
  if (n == 0) return 0.0;
  double f = 0.0 + x[0];
  if (!compensated) {
    for (size_t i = 1; i < n; ++i) f += x[i];
    return f;
  }
  double c = 0.0;
  for (size_t i = 1; i < n; ++i) {
    const double t = f + x[i];
    if (std::fabs(f) >= std::fabs(x[i]))
      c += (f - t) + x[i];
    else
      c += (x[i] - t) + f;
    f = t;
  }
  if (c != 0.0 && std::isfinite(c)) f += c;
  return f;
}

void prefix_lower_medians(const double* x, size_t n, double* out) {
  std::vector<double> lo, hi;  // lo: a max-heap of the smaller half (its top is the lower median); hi: a min-heap
  auto greater = [](double a, double b) { return a > b; };
  for (size_t i = 0; i < n; ++i) {
    const double v = x[i];
    if (!lo.empty() && v > lo.front()) {
      hi.push_back(v);
      std::push_heap(hi.begin(), hi.end(), greater);
    } else {
      lo.push_back(v);
      std::push_heap(lo.begin(), lo.end());
    }
    // Balance: lo holds ceil(n / 2) values.
    if (lo.size() > hi.size() + 1) {
      std::pop_heap(lo.begin(), lo.end());
      hi.push_back(lo.back());
      lo.pop_back();
      std::push_heap(hi.begin(), hi.end(), greater);
    } else if (hi.size() > lo.size()) {
      std::pop_heap(hi.begin(), hi.end(), greater);
      lo.push_back(hi.back());
      hi.pop_back();
      std::push_heap(lo.begin(), lo.end());
    }
    out[i] = lo.front();
  }
}

double PlanCore::fsum(const double* x, size_t n) const { return py_sum(x, n, compensated_); }

void PlanCore::medians(double now, double out[2]) const {
  // WorkloadScales.medians: the median estimate of the jobs of each class submitted by now (searchsorted right).
  bool has[2];
  double v[2] = {0.0, 0.0};
  for (int c = 0; c < 2; ++c) {
    const std::vector<double>& s = medians_.submit[c];
    const size_t k = static_cast<size_t>(std::upper_bound(s.begin(), s.end(), now) - s.begin());
    has[c] = k > 0;
    if (has[c]) v[c] = medians_.median[c][k - 1];
  }
  const double te = has[0] ? v[0] : (has[1] ? v[1] : 1.0);
  out[0] = te;
  out[1] = has[1] ? v[1] : te;
}

double PlanCore::estimate_of(int j) const { return engine_->duration(j) * estimate_[j]; }

double PlanCore::remaining_of(int j, double now) const {
  const Engine& e = *engine_;
  const double elapsed = now - e.run_start()[j];
  return max0(e.remaining()[j] - py_max(0.0, elapsed - e.run_overhead()[j])) * estimate_[j];
}

void PlanCore::queue_jobs(std::vector<int>& out, size_t& n_te) const {
  // ScaleFreeObserver.queued: up to queue_rows oldest waiting TE jobs (not the one being decided), then up to
  // queue_rows oldest waiting BE jobs.
  out.clear();
  n_te = 0;
  if (queue_rows_ == 0) return;
  auto [te, be] = engine_->queued(queue_rows_ + 1);
  for (int j : te)
    if (j != job_ && static_cast<int>(out.size()) < queue_rows_) out.push_back(j);
  n_te = out.size();
  for (int j : be)
    if (out.size() - n_te < static_cast<size_t>(queue_rows_)) out.push_back(j);
}

void PlanCore::greedy_starts(std::vector<double>& avail, const std::vector<int>& jobs, size_t n_te,
                             int64_t started[2]) const {
  // scalefree._greedy_starts (jobs: the n_te TE rows' jobs, then the BE rows').
  started[0] = started[1] = 0;
  std::vector<int>& fitting = fitting_;
  std::vector<double>& keys = keys_;
  std::vector<int>& order = order_;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const int j = jobs[i];
    const double* d = engine_->member(j);
    fitting.clear();
    for (int n = 0; n < n_nodes_; ++n)
      if (covers(&avail[3 * static_cast<size_t>(n)], d)) fitting.push_back(n);
    const int k = engine_->gang(j);
    if (static_cast<int>(fitting.size()) < k) continue;
    // fitting.sort(key=(gpus left, cpus left, memory left)): stable (an insertion sort: a few nodes, and no
    // allocation as std::stable_sort's buffer).
    keys.resize(3 * fitting.size());
    for (size_t f = 0; f < fitting.size(); ++f) {
      const double* a = &avail[3 * static_cast<size_t>(fitting[f])];
      keys[3 * f] = a[0] - d[0];
      keys[3 * f + 1] = a[1] - d[1];
      keys[3 * f + 2] = a[2] - d[2];
    }
    order.resize(fitting.size());
    for (size_t f = 0; f < order.size(); ++f) {
      const int x = static_cast<int>(f);
      size_t p = f;
      while (p > 0 && less3(&keys[3 * static_cast<size_t>(x)], &keys[3 * static_cast<size_t>(order[p - 1])])) {
        order[p] = order[p - 1];
        --p;
      }
      order[p] = x;
    }
    for (int p = 0; p < k; ++p) {
      double* a = &avail[3 * static_cast<size_t>(fitting[order[p]])];
      a[0] -= d[0];
      a[1] -= d[1];
      a[2] -= d[2];
    }
    ++started[i < n_te ? 0 : 1];
  }
}

void PlanCore::mask(bool* out) const {
  // With no decision pending, 0 alone (DecisionBackend.step takes action 0 to end an episode).
  for (int i = 0; i < max_plans_; ++i) out[i] = i == 0 || static_cast<size_t>(i) < n_options_;
}

void PlanCore::observe(float* out) const {
  std::fill(out, out + observation_size(), 0.0f);
  if (job_ < 0) return;
  const Engine& e = *engine_;
  const double sg = scale_[0], sc = scale_[1], sm = scale_[2];
  const double tg = total_[0], tc = total_[1], tm = total_[2];
  const double n = static_cast<double>(n_nodes_);
  const double now = e.now();
  double med[2];
  medians(now, med);
  const double te = med[0], be = med[1];

  float* o = out;
  // ---------------------------------------------------------------- ScaleFreeObserver.head
  const double* d = e.member(job_);
  const double est = estimate_of(job_);
  // (avail + held).sum(axis=0) and held.sum(axis=0): numpy adds the rows in order.
  const std::vector<double>& avail = e.avail();
  const double* hd = e.held().data();
  double unused[3] = {0.0, 0.0, 0.0}, held[3] = {0.0, 0.0, 0.0};
  for (int k = 0; k < n_nodes_; ++k) {
    for (int x = 0; x < 3; ++x) {
      double u = avail[3 * k + x] + hd[3 * k + x];
      unused[x] = k ? unused[x] + u : u;
      held[x] = k ? held[x] + hd[3 * k + x] : hd[3 * k + x];
    }
  }
  *o++ = clip01(d[0] / sg);
  *o++ = clip01(d[1] / sc);
  *o++ = clip01(d[2] / sm);
  *o++ = clip01(static_cast<double>(e.gang(job_)) / n);
  *o++ = clip01(ratio(now - e.submit(job_), est));
  *o++ = clip01(ratio(est, te));
  o += 5;  // victims_chosen, continuing, missing_*: the victim mode's
  *o++ = clip01(unused[0] / tg);
  *o++ = clip01(unused[1] / tc);
  *o++ = clip01(unused[2] / tm);
  *o++ = clip01(held[0] / tg);
  *o++ = clip01(held[1] / tc);
  *o++ = clip01(held[2] / tm);
  *o++ = clip01(ratio(static_cast<double>(e.queued_te()), n));
  *o++ = clip01(ratio(static_cast<double>(e.queued_be()), n));
  *o++ = clip01(ratio(static_cast<double>(n_be_), n));
  *o++ = clip01(te / (te + be));

  // ---------------------------------------------------------------- ScaleFreeObserver.queue
  std::vector<int>& jobs = queue_;
  size_t n_te = 0;
  queue_jobs(jobs, n_te);
  const double cap_p = static_cast<double>(std::max<int64_t>(e.max_preemptions(), 1));
  const std::vector<int64_t>& preemptions = e.preemptions();
  size_t at = 0;
  for (int cls = 0; cls < 2; ++cls) {
    const double unit = med[cls];
    const size_t first = at;
    const size_t stop = cls == 0 ? n_te : jobs.size();
    for (; at < stop; ++at) {
      const int j = jobs[at];
      const double* dj = e.member(j);
      const double estj = estimate_of(j);
      const double wait = now - e.submit(j);
      int fitting = 0;
      for (int k = 0; k < n_nodes_; ++k) fitting += covers(&avail[3 * static_cast<size_t>(k)], dj);
      *o++ = 1.0f;
      *o++ = cls == 0 ? 1.0f : 0.0f;
      *o++ = clip01(static_cast<double>(e.gang(j)) / n);
      *o++ = clip01(dj[0] / sg);
      *o++ = clip01(dj[1] / sc);
      *o++ = clip01(dj[2] / sm);
      *o++ = clip01(ratio(wait, unit));
      *o++ = clip01(ratio(estj, unit));
      *o++ = clip01(ratio(wait, estj));
      *o++ = clip01(py_min(1.0, static_cast<double>(preemptions[j]) / cap_p));
      *o++ = fitting >= e.gang(j) ? 1.0f : 0.0f;
    }
    o += static_cast<size_t>(PLAN_QUEUE) * (static_cast<size_t>(queue_rows_) - (at - first));
  }

  // ---------------------------------------------------------------- ScaleFreeObserver.plan_row, per option
  const std::vector<double>& run_start = e.run_start();
  const int64_t max_p = e.max_preemptions();
  std::vector<double>& av = avail_after_;
  std::vector<double>& sums = sums_;
  std::vector<uint8_t>& touched = touched_;
  touched.resize(static_cast<size_t>(n_nodes_));
  const uint32_t per_node_bit = 1u << (1 + rules_.size());
  for (size_t i_opt = 0; i_opt < n_options_; ++i_opt) {
    const PlanChoice& opt = options_[i_opt];
    const std::vector<int>& victims = opt.plan.victims;
    const std::vector<int>& nodes = opt.plan.nodes;
    av.assign(avail.begin(), avail.end());
    double freed[3] = {0.0, 0.0, 0.0};
    std::fill(touched.begin(), touched.end(), 0);
    int n_touched = 0;
    for (int v : victims) {
      const double* dv = e.member(v);
      const int* vn = e.placed_nodes(v);
      for (int p = 0, k = e.n_placed(v); p < k; ++p) {
        const int node = vn[p];
        if (!touched[node]) {
          touched[node] = 1;
          ++n_touched;
        }
        double* a = &av[3 * static_cast<size_t>(node)];
        a[0] += dv[0];
        a[1] += dv[1];
        a[2] += dv[2];
        freed[0] += dv[0];
        freed[1] += dv[1];
        freed[2] += dv[2];
      }
    }
    for (int node : nodes) {
      double* a = &av[3 * static_cast<size_t>(node)];
      a[0] -= d[0];
      a[1] -= d[1];
      a[2] -= d[2];
    }
    double surplus = 0.0;
    if (!nodes.empty()) {
      sums.clear();
      for (int node : nodes) sums.push_back(max0(av[3 * static_cast<size_t>(node)]));
      surplus = fsum(sums.data(), sums.size());
    }
    int64_t starts[2];
    greedy_starts(av, jobs, n_te, starts);
    sums.clear();
    double largest = 0.0;
    for (int k = 0; k < n_nodes_; ++k) {
      const double g = max0(av[3 * static_cast<size_t>(k)]);
      sums.push_back(g);
      if (k == 0 || g > largest) largest = g;  // max(...): the first maximal one
    }
    const double free_gpus = fsum(sums.data(), sums.size());
    const size_t nv = victims.size();
    double remaining = 0.0, elapsed = 0.0, max_grace = 0.0;
    int64_t max_pre = 0, gang_victims = 0, last_chance = 0;
    if (nv) {
      sums.clear();
      for (int v : victims) sums.push_back(remaining_of(v, now));
      remaining = fsum(sums.data(), sums.size());
      sums.clear();
      for (int v : victims) sums.push_back(now - run_start[v]);
      elapsed = fsum(sums.data(), sums.size());
      max_grace = e.grace(victims[0]);
      max_pre = preemptions[victims[0]];
      for (int v : victims) {
        if (e.grace(v) > max_grace) max_grace = e.grace(v);
        if (preemptions[v] > max_pre) max_pre = preemptions[v];
        gang_victims += e.gang(v) > 1;
        last_chance += preemptions[v] + 1 >= max_p;
      }
    }
    const double dn = static_cast<double>(nv);
    *o++ = 1.0f;                               // valid
    *o++ = nodes.empty() ? 1.0f : 0.0f;        // wait
    for (size_t r = 0; r < rules_.size(); ++r)  // by_<rule>
      *o++ = (opt.sources >> (1 + r)) & 1u ? 1.0f : 0.0f;
    *o++ = opt.sources & per_node_bit ? 1.0f : 0.0f;  // per_node
    *o++ = clip01(ratio(dn, 1.0));
    *o++ = clip01(nv ? static_cast<double>(gang_victims) / dn : 0.0);
    *o++ = clip01(static_cast<double>(n_touched) / n);
    *o++ = clip01(freed[0] / tg);
    *o++ = clip01(freed[1] / tc);
    *o++ = clip01(freed[2] / tm);
    *o++ = clip01(nodes.empty() ? 0.0 : surplus / (static_cast<double>(nodes.size()) * sg));
    *o++ = clip01(ratio(max_grace, est));
    *o++ = clip01(ratio(remaining, be));
    *o++ = clip01(ratio(remaining, est));
    *o++ = clip01(ratio(elapsed, be));
    *o++ = clip01(py_min(1.0, static_cast<double>(max_pre) / cap_p));
    *o++ = clip01(nv ? static_cast<double>(last_chance) / dn : 0.0);
    *o++ = clip01(ratio(static_cast<double>(starts[0]), 1.0));
    *o++ = clip01(ratio(static_cast<double>(starts[1]), 1.0));
    *o++ = clip01(free_gpus / tg);
    *o++ = clip01(free_gpus > EPS ? 1.0 - largest / free_gpus : 0.0);
  }
}

}  // namespace schedgym
