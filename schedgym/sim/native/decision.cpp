// The victim-by-victim decision protocol on the native engine; see decision.hpp. Method names follow
// schedgym/decision/stepwise.py (Python's `_candidate_rows` is `candidate_rows` here, and so on).
//
// Floating point: the observation is computed as StepwiseDecision.observe computes it, operation by operation
// in float64 (the build forbids contraction and reassociation, see CMakeLists.txt), each value rounded to
// float32 as numpy does when the list is assigned into the float32 array, then clipped as np.clip does.
#include "decision.hpp"

#include "resources.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace schedgym {

namespace {

// schedgym.decision.features.squash.
inline double squash(double x, double scale) { return x > 0 ? x / (x + scale) : 0.0; }
// float64 -> float32 (numpy's assignment of a Python float), then np.clip(x, 0, 1) on float32.
inline float clip01(double v) {
  float x = static_cast<float>(v);
  if (!std::isnan(x)) x = (x > 0.0f) ? x : 0.0f;
  if (!std::isnan(x)) x = (x < 1.0f) ? x : 1.0f;
  return x;
}

template <typename T>
bool contains(const std::vector<T>& v, T x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

EnvCore::EnvCore(Engine* engine, int max_candidates, std::vector<double> estimate, const double* scale,
                 const double* total, const double* head_scale, const double* row_scale)
    : engine_(engine), max_candidates_(max_candidates), estimate_(std::move(estimate)) {
  if (engine_ == nullptr) throw std::invalid_argument("EnvCore needs an engine");
  if (max_candidates < 1) throw std::invalid_argument("Expected max_candidates >= 1, got " + std::to_string(max_candidates));
  if (estimate_.size() != static_cast<size_t>(engine_->n_jobs()))
    throw std::invalid_argument("Expected one estimate factor per job (" + std::to_string(engine_->n_jobs()) +
                                "), got " + std::to_string(estimate_.size()));
  for (int r = 0; r < 3; ++r) {
    scale_[r] = scale[r];
    total_[r] = total[r];
  }
  std::copy(head_scale, head_scale + OBS_HEAD, head_scale_);
  std::copy(row_scale, row_scale + OBS_ROW, row_scale_);
  n_nodes_ = engine_->n_nodes();
  cand_.resize(n_nodes_);
  room_.assign(3 * static_cast<size_t>(n_nodes_), 0.0);
  in_room_.assign(n_nodes_, 0);
  is_chosen_.assign(engine_->n_jobs(), 0);
  seen_.assign(engine_->n_jobs(), 0);
}

// ==================================================================== driving

bool EnvCore::next_decision() {
  int job;
  while ((job = engine_->advance()) >= 0) {
    begin(job);
    if (!rows_.empty()) {
      ++n_offered_;
      return true;
    }
    resolve({}, {});  // no victim can make room: no choice to offer
  }
  end();
  return false;
}

int EnvCore::choose(int action) {
  if (job_ < 0) throw std::logic_error("choose() called with no decision pending");
  if (action < 0 || static_cast<size_t>(action) > rows_.size())
    throw std::out_of_range("Action " + std::to_string(action) + " is illegal in this decision; legal actions are 0.." +
                            std::to_string(rows_.size()));
  if (action == 0) {
    resolve({}, {});
    return 0;
  }
  auto [victim, node] = rows_[action - 1];
  chosen_.push_back(victim);
  is_chosen_[victim] = 1;
  if (!contains(targets_, node)) targets_.push_back(node);
  compute_room();
  if (complete_plan(plan_nodes_)) {
    plan_victims_.assign(chosen_.begin(), chosen_.end());
    int n = static_cast<int>(chosen_.size());
    resolve(plan_nodes_, plan_victims_);
    return n;
  }
  candidate_rows();
  return -1;
}

bool EnvCore::attach() {
  int job = engine_->pending();
  if (job < 0) {
    end();
    return false;
  }
  begin(job);
  return true;
}

void EnvCore::restore(const std::vector<int>& chosen, const std::vector<int>& targets) {
  if (job_ < 0) throw std::logic_error("restore() called with no decision pending");
  // Checked in full before anything changes.
  for (size_t i = 0; i < chosen.size(); ++i) {
    int v = chosen[i];
    bool candidate = v >= 0 && v < engine_->n_jobs() && !is_chosen_[v] &&
                     std::find(chosen.begin(), chosen.begin() + i, v) == chosen.begin() + i;
    if (candidate) {
      candidate = false;
      for (int n : cand_nodes_) candidate = candidate || std::binary_search(cand_[n].begin(), cand_[n].end(), v);
    }
    if (!candidate) throw std::invalid_argument("restore(): job index " + std::to_string(v) + " is not a candidate");
  }
  for (int n : targets)
    if (n < 0 || n >= n_nodes_) throw std::invalid_argument("restore(): node " + std::to_string(n) + " out of range");
  if ((chosen_.size() + chosen.size() == 0) != (targets_.size() + targets.size() == 0))
    throw std::invalid_argument("restore(): chosen victims and target nodes go together");
  for (int v : chosen) {
    is_chosen_[v] = 1;
    chosen_.push_back(v);
  }
  targets_.insert(targets_.end(), targets.begin(), targets.end());
  compute_room();
  candidate_rows();
}

std::vector<int64_t> EnvCore::take_log() {
  std::vector<int64_t> out;
  out.swap(log_);
  return out;
}

void EnvCore::begin(int job) {
  end();
  job_ = job;
  cand_nodes_.clear();
  n_be_ = 0;
  for (int n = 0; n < n_nodes_; ++n) {
    const std::vector<int>& c = engine_->candidates_on(n);
    cand_[n].assign(c.begin(), c.end());
    if (c.empty()) continue;
    std::sort(cand_[n].begin(), cand_[n].end());
    cand_nodes_.push_back(n);
    for (int j : c)
      if (!seen_[j]) {
        seen_[j] = 1;
        ++n_be_;
      }
  }
  for (int n : cand_nodes_)
    for (int j : cand_[n]) seen_[j] = 0;
  candidate_rows();
}

void EnvCore::end() {
  for (int v : chosen_) is_chosen_[v] = 0;
  chosen_.clear();
  targets_.clear();
  rows_.clear();
  for (int n : room_nodes_) in_room_[n] = 0;
  room_nodes_.clear();
  job_ = -1;
}

void EnvCore::resolve(const std::vector<int64_t>& nodes, const std::vector<int64_t>& victims) {
  if (engine_->pending() != job_)
    throw std::logic_error("the simulation was advanced or resolved outside this decision");
  engine_->resolve(nodes, victims);
  log_.push_back(static_cast<int64_t>(nodes.size()));
  log_.push_back(static_cast<int64_t>(victims.size()));
  log_.insert(log_.end(), nodes.begin(), nodes.end());
  log_.insert(log_.end(), victims.begin(), victims.end());
  end();
}

// ==================================================================== rows and plans

void EnvCore::compute_room() {
  // Per node touched by chosen victims: avail plus what they free there, victims in order of choice.
  for (int n : room_nodes_) in_room_[n] = 0;
  room_nodes_.clear();
  const double* avail = engine_->avail().data();
  for (int v : chosen_) {
    const double* d = engine_->member(v);
    const int* nodes = engine_->placed_nodes(v);
    for (int p = 0, k = engine_->n_placed(v); p < k; ++p) {
      int n = nodes[p];
      double* r = &room_[3 * static_cast<size_t>(n)];
      if (!in_room_[n]) {
        in_room_[n] = 1;
        room_nodes_.push_back(n);
        const double* a = avail + 3 * static_cast<size_t>(n);
        r[0] = a[0];
        r[1] = a[1];
        r[2] = a[2];
      }
      r[0] += d[0];
      r[1] += d[1];
      r[2] += d[2];
    }
  }
}

const double* EnvCore::room_on(int n) const {
  return in_room_[n] ? &room_[3 * static_cast<size_t>(n)] : engine_->avail().data() + 3 * static_cast<size_t>(n);
}

void EnvCore::candidate_rows() {
  const double* d = engine_->member(job_);
  const int k = engine_->gang(job_);
  feasible_.clear();
  per_node_.clear();
  per_node_off_.assign(1, 0);
  auto consider = [&](int n) {
    const double* r = room_on(n);
    if (covers(r, d)) return;
    size_t start = per_node_.size();
    for (int c : cand_[n])
      if (!is_chosen_[c]) per_node_.push_back(c);
    double g = r[0], c_ = r[1], m = r[2];
    for (size_t i = start; i < per_node_.size(); ++i) {
      const double* cd = engine_->member(per_node_[i]);
      g += cd[0];
      c_ += cd[1];
      m += cd[2];
    }
    if (covers3(g, c_, m, d)) {
      feasible_.push_back(n);
      per_node_off_.push_back(static_cast<int>(per_node_.size()));
    } else {
      per_node_.resize(start);
    }
  };
  if (k == 1 && !targets_.empty()) {
    consider(targets_[0]);
  } else {
    for (int n : cand_nodes_) consider(n);
  }
  rows_.clear();
  if (k > 1 && n_fitting() + static_cast<int>(feasible_.size()) < k) return;
  // Round-robin over the feasible nodes in node order, each node's candidates by job index.
  const size_t limit = static_cast<size_t>(max_candidates_);
  for (int depth = 0; rows_.size() < limit; ++depth) {
    bool added = false;
    for (size_t i = 0; i < feasible_.size(); ++i) {
      if (depth < per_node_off_[i + 1] - per_node_off_[i]) {
        rows_.emplace_back(per_node_[per_node_off_[i] + depth], feasible_[i]);
        added = true;
        if (rows_.size() == limit) break;
      }
    }
    if (!added) break;
  }
}

int EnvCore::n_fitting() const {
  // Nodes where the TE job fits now, counting what the chosen victims free.
  const double* d = engine_->member(job_);
  int count = 0;
  for (int n = 0; n < n_nodes_; ++n) count += covers(room_on(n), d);
  return count;
}

bool EnvCore::complete_plan(std::vector<int64_t>& nodes) {
  // The plan's nodes if the chosen victims make room for the TE job (room_ must be current).
  const double* d = engine_->member(job_);
  const size_t k = static_cast<size_t>(engine_->gang(job_));
  nodes.clear();
  if (k == 1) {
    int target = targets_[0];
    if (!covers(room_on(target), d)) return false;
    nodes.push_back(target);
    return true;
  }
  // Gang: the nodes the agent targeted, then nodes that already had room, then nodes freed in passing.
  for (int n : targets_)
    if (covers(room_on(n), d)) nodes.push_back(n);
  if (nodes.size() < k) {
    const double* avail = engine_->avail().data();
    for (int n = 0; n < n_nodes_ && nodes.size() < k; ++n)
      if (covers(avail + 3 * static_cast<size_t>(n), d) && !contains(nodes, static_cast<int64_t>(n)))
        nodes.push_back(n);
  }
  if (nodes.size() < k) {
    std::vector<int> touched(room_nodes_);
    std::sort(touched.begin(), touched.end());
    for (int n : touched) {
      if (nodes.size() >= k) break;
      if (!contains(nodes, static_cast<int64_t>(n)) && covers(&room_[3 * static_cast<size_t>(n)], d))
        nodes.push_back(n);
    }
  }
  if (nodes.size() < k) return false;
  nodes.resize(k);
  return true;
}

// ==================================================================== observation

void EnvCore::mask(bool* out) const {
  for (int i = 0; i <= max_candidates_; ++i) out[i] = static_cast<size_t>(i) <= rows_.size();
}

void EnvCore::observe(float* out) const {
  std::fill(out, out + observation_size(), 0.0f);
  if (job_ < 0) return;
  const Engine& e = *engine_;
  const double sg = scale_[0], sc = scale_[1], sm = scale_[2];
  const double tg = total_[0], tc = total_[1], tm = total_[2];
  const double now = e.now();
  const double* d = e.member(job_);
  double missing[3] = {0.0, 0.0, 0.0};
  if (!targets_.empty()) {
    const double* r = room_on(targets_[0]);
    missing[0] = py_max(d[0] - r[0], 0.0) / sg;
    missing[1] = py_max(d[1] - r[1], 0.0) / sc;
    missing[2] = py_max(d[2] - r[2], 0.0) / sm;
  }
  // (avail + held).sum(axis=0) and held.sum(axis=0): numpy adds the rows in order.
  const double* av = e.avail().data();
  const double* hd = e.held().data();
  double unused[3] = {0.0, 0.0, 0.0}, held[3] = {0.0, 0.0, 0.0};
  for (int n = 0; n < n_nodes_; ++n) {
    for (int x = 0; x < 3; ++x) {
      double u = av[3 * n + x] + hd[3 * n + x];
      unused[x] = n ? unused[x] + u : u;
      held[x] = n ? held[x] + hd[3 * n + x] : hd[3 * n + x];
    }
  }
  const double q_te = static_cast<double>(e.queued_te());
  const double q_be = static_cast<double>(e.queued_be());
  const size_t n_chosen = chosen_.size();

  float* o = out;
  // JOB_FEATURES
  *o++ = clip01(d[0] / sg);
  *o++ = clip01(d[1] / sc);
  *o++ = clip01(d[2] / sm);
  *o++ = clip01(static_cast<double>(e.gang(job_)) / static_cast<double>(n_nodes_));
  *o++ = clip01(squash(now - e.submit(job_), head_scale_[feature::WAIT]));
  *o++ = clip01(squash(e.duration(job_) * estimate_[job_], head_scale_[feature::DURATION_ESTIMATE]));
  *o++ = clip01(py_min(1.0, static_cast<double>(n_chosen) / static_cast<double>(max_candidates_)));
  *o++ = clip01(n_chosen ? 1.0 : 0.0);
  *o++ = clip01(missing[0]);
  *o++ = clip01(missing[1]);
  *o++ = clip01(missing[2]);
  // CLUSTER_FEATURES
  *o++ = clip01(unused[0] / tg);
  *o++ = clip01(unused[1] / tc);
  *o++ = clip01(unused[2] / tm);
  *o++ = clip01(held[0] / tg);
  *o++ = clip01(held[1] / tc);
  *o++ = clip01(held[2] / tm);
  *o++ = clip01(squash(q_te, head_scale_[feature::QUEUED_TE]));
  *o++ = clip01(squash(q_be, head_scale_[feature::QUEUED_BE]));
  *o++ = clip01(py_min(1.0, static_cast<double>(n_be_) / (head_scale_[feature::RUNNING_BE] * n_nodes_)));
  // CANDIDATE_FEATURES, one row per candidate
  const double cap_p = static_cast<double>(std::max<int64_t>(e.max_preemptions(), 1));
  const std::vector<double>& run_start = e.run_start();
  const std::vector<double>& run_overhead = e.run_overhead();
  const std::vector<double>& remaining_work = e.remaining();
  const std::vector<int64_t>& preemptions = e.preemptions();
  for (const auto& [c, n] : rows_) {
    const double* r = room_on(n);
    const double* cd = e.member(c);
    const double elapsed = now - run_start[c];
    const double remaining = py_max(remaining_work[c] - py_max(0.0, elapsed - run_overhead[c]), 0.0);
    *o++ = 1.0f;
    *o++ = clip01(cd[0] / sg);
    *o++ = clip01(cd[1] / sc);
    *o++ = clip01(cd[2] / sm);
    *o++ = clip01(r[0] / sg);
    *o++ = clip01(r[1] / sc);
    *o++ = clip01(r[2] / sm);
    *o++ = covers3(r[0] + cd[0], r[1] + cd[1], r[2] + cd[2], d) ? 1.0f : 0.0f;
    *o++ = clip01(squash(e.grace(c), row_scale_[feature::GRACE_PERIOD]));
    *o++ = clip01(squash(elapsed, row_scale_[feature::ELAPSED]));
    *o++ = clip01(py_min(1.0, static_cast<double>(preemptions[c]) / cap_p));
    *o++ = clip01(squash(remaining * estimate_[c], row_scale_[feature::REMAINING_ESTIMATE]));
    *o++ = e.gang(c) > 1 ? 1.0f : 0.0f;
  }
}

}  // namespace schedgym
