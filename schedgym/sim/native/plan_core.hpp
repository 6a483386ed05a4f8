// The plan-level decision protocol (schedgym/decision/plan_mode.py, plans.py and scalefree.py) on the native
// engine's state: what PreemptionEnv runs on every step of schedgym/PreemptionPlan-v1, without building Python
// requests, Job records, plan objects or observation lists.
//
// The Python modules are the specification. PlanCore mirrors them function for function:
// - the options of a request (plans.plan_options): wait, the plans of the given rules (the native rules of
//   rules.cpp, which tests/test_native_rules.py holds to baselines/), then, for a job of one node, the fewest
//   victims that make room on each node (plans.fewest_victims, same subset order, tie-breaks and limit);
//   identical plans (as sets of nodes and victims) listed once, the first kept, with every proposer's flag;
//   cut at max_plans;
// - the mask (PlanDecision.mask) and the resolve of the chosen option;
// - observation version 2 in the plan mode (ScaleFreeObserver.head, .queue, .plan_row, .assemble), computed
//   with the same float64 operations in the same order (Python's sum() included, compensated as CPython >= 3.12
//   sums floats when asked to), cast to float32 and clipped as numpy does, so that both are bit-identical.
//
// The running medians of the estimates (scalefree.WorkloadScales) are computed in Python and handed over at
// construction, as are the estimate factors and the capacity scales.
//
// Plain C++17, no Python: bindings.cpp wraps it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine.hpp"
#include "rules.hpp"

namespace schedgym {

// schedgym.decision.features, version 2, plan mode: the head (JOB_FEATURES_V2 + CLUSTER_FEATURES_V2), a queue
// row (QUEUE_FEATURES), and a plan row (PLAN_FEATURES) without its per-rule flags (one "by_<rule>" per rule).
constexpr int PLAN_HEAD = 21;
constexpr int PLAN_QUEUE = 11;
constexpr int PLAN_ROW_BASE = 20;

// The feature names PlanCore computes, in observation order (the per-rule flags named after `rules`), for the
// Python side to check against the declaration.
std::vector<std::string> plan_head_names();
std::vector<std::string> plan_queue_names();
std::vector<std::string> plan_row_names(const std::vector<std::string>& rules);

// Python's sum() of n floats with its default start 0 (0.0 for n == 0); `compensated`: as CPython >= 3.12 sums
// floats (Neumaier's compensated summation), else one addition after the other.
double py_sum(const double* x, size_t n, bool compensated);

// scalefree.prefix_lower_medians: out[i] = the lower median of x[0..i] (the element of rank i / 2), by the same two
// heaps (O(n log n)).
void prefix_lower_medians(const double* x, size_t n, double* out);

// scalefree.WorkloadScales: per class (0 TE, 1 BE), the submit times of its jobs in (stable) submit order and the
// lower median of the estimates of the first i + 1 of them.
struct RunningMedians {
  std::vector<double> submit[2];
  std::vector<double> median[2];
};

// One option: its plan (as the proposer listed it) and who proposed it (bit 0: wait; bit 1 + r: rule r;
// bit 1 + n_rules: the per-node search).
struct PlanChoice {
  Plan plan;
  uint32_t sources = 0;
  std::vector<int> key_nodes, key_victims;  // sorted and unique: the plan as sets
};

class PlanCore {
 public:
  // `engine` must outlive this object. `rules`: the rules whose plans are offered, in order (at most 30).
  // `estimate`: one factor per job; `scale`, `total`: 3 values each (ScaleFreeObserver.scale and .total).
  // `max_subset`: plans.MAX_SUBSET_CANDIDATES. `compensated_sum`: sum floats as CPython >= 3.12's sum() does.
  // Throws std::invalid_argument for sizes that do not match.
  PlanCore(Engine* engine, std::vector<std::unique_ptr<Rule>> rules, int max_plans, int queue_rows,
           std::vector<double> estimate, const double* scale, const double* total, RunningMedians medians,
           int max_subset, bool compensated_sum);

  // ---------------------------------------------------------------- driving
  // DecisionBackend._next_decision: advance to the next request that offers a choice (true), declining those
  // whose only option is to wait, or to the end of the workload (false).
  bool next_decision();
  // Resolve the pending request with option `action`; returns the number of victims (0 for wait). Throws
  // std::out_of_range for an action outside [0, n_options), std::logic_error with no decision pending.
  int choose(int action);
  // Begin deciding the engine's pending request, if any (after the engine was rebuilt or copied): true if one is.
  bool attach();

  // ---------------------------------------------------------------- reading
  int job() const { return job_; }
  int max_plans() const { return max_plans_; }
  int queue_rows() const { return queue_rows_; }
  int n_rules() const { return static_cast<int>(rules_.size()); }
  int row_width() const { return PLAN_ROW_BASE + n_rules(); }
  int observation_size() const { return PLAN_HEAD + 2 * queue_rows_ * PLAN_QUEUE + max_plans_ * row_width(); }
  int64_t n_offered() const { return n_offered_; }
  size_t n_options() const { return n_options_; }  // wait included; 0 with no decision pending
  const PlanChoice& option(size_t i) const { return options_[i]; }
  // PlanDecision.observe into out[observation_size()] (all zeros with no decision pending).
  void observe(float* out) const;
  // PlanDecision.mask into out[max_plans] (0 alone with no decision pending).
  void mask(bool* out) const;
  // scalefree.WorkloadScales.medians(now): (TE, BE).
  void medians(double now, double out[2]) const;

  // Every resolve made since the last take_log(), flattened: n_nodes, n_victims, nodes..., victims... each.
  std::vector<int64_t> take_log();

 private:
  void begin(int job);
  void end();
  void resolve(const std::vector<int>& nodes, const std::vector<int>& victims);
  void add(const Plan& plan, uint32_t source);
  bool fewest_victims(const double deficit[3], const std::vector<Candidate>& cands, std::vector<int>& out);
  double fsum(const double* x, size_t n) const;  // py_sum as the Python running the spec sums
  void queue_jobs(std::vector<int>& out, size_t& n_te) const;  // ScaleFreeObserver.queued (n_te TE jobs first)
  void greedy_starts(std::vector<double>& avail, const std::vector<int>& jobs, size_t n_te, int64_t started[2]) const;
  double estimate_of(int j) const;
  double remaining_of(int j, double now) const;

  Engine* engine_;
  std::vector<std::unique_ptr<Rule>> rules_;
  int max_plans_, queue_rows_, max_subset_;
  bool compensated_;
  std::vector<double> estimate_;
  double scale_[3], total_[3];
  RunningMedians medians_;
  int n_nodes_;

  // The request being decided (the engine's state does not change until it is resolved).
  int job_ = -1;
  RequestView view_;
  int64_t n_be_ = 0;  // distinct candidate jobs
  std::vector<PlanChoice> options_;  // the first n_options_ are the decision's (the rest: storage kept)
  size_t n_options_ = 0;
  std::vector<int64_t> log_;
  int64_t n_offered_ = 0;

  // Scratch space (observe()'s is mutable: the binding holds the engine's lock around every call).
  std::vector<uint8_t> seen_;
  std::vector<int> subset_, best_, ids_, key_nodes_, key_victims_;
  std::vector<std::vector<Candidate>> spare_;
  mutable std::vector<int> queue_, fitting_, order_;
  mutable std::vector<double> keys_, avail_after_, sums_;
  mutable std::vector<uint8_t> touched_;
  std::vector<int64_t> nodes64_, victims64_;
  Plan per_node_;
};

}  // namespace schedgym
