// The victim-by-victim decision protocol (schedgym/decision/stepwise.py) on the native engine's state: what
// PreemptionEnv runs on every step, without building Python requests, Job records or observation lists.
//
// schedgym/decision/stepwise.py is the specification. EnvCore mirrors DecisionEncoder + StepwiseDecision (and
// DecisionBackend._next_decision) method for method: the same candidate rows in the same order, the same plans
// (gang picking order included), and an observation computed with the same float64 operations in the same
// order, cast to float32 at the end and clipped to [0, 1], so that both give bit-identical observations.
//
// Plain C++17, no Python: bindings.cpp wraps it.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "engine.hpp"

namespace schedgym {

// schedgym.decision.features: features before the first candidate row, and per candidate row.
constexpr int OBS_HEAD = 20;
constexpr int OBS_ROW = 13;

// Where observe() uses a feature's declared scale: positions in the head and within a candidate row. The
// scales themselves are not written here: EnvCore takes them from schedgym.decision.features at construction.
// Exported as schedgym.sim._engine.FEATURE_INDEX; a test checks these positions against the declaration.
namespace feature {
constexpr int WAIT = 4, DURATION_ESTIMATE = 5, QUEUED_TE = 17, QUEUED_BE = 18, RUNNING_BE = 19;
constexpr int GRACE_PERIOD = 8, ELAPSED = 9, REMAINING_ESTIMATE = 11;
}  // namespace feature

class EnvCore {
 public:
  // `engine` must outlive this object. `estimate` has one factor per job; `scale` and `total` three values
  // each (DecisionEncoder.scale and .total); `head_scale` OBS_HEAD and `row_scale` OBS_ROW values, the features'
  // declared scales (schedgym.decision.features.feature_scales). Throws std::invalid_argument for sizes that do
  // not match.
  EnvCore(Engine* engine, int max_candidates, std::vector<double> estimate, const double* scale,
          const double* total, const double* head_scale, const double* row_scale);

  // ---------------------------------------------------------------- driving
  // DecisionBackend._next_decision: advance the engine to the next request that offers a choice (true), declining
  // those that offer none, or to the end of the workload (false).
  bool next_decision();
  // StepwiseDecision.choose plus the resolve: 0 declines; i >= 1 chooses row i-1. Returns the number of victims
  // preempted once the request is resolved (0 for a decline), or -1 if the decision goes on (rows recomputed).
  // Throws std::out_of_range for an action outside [0, rows], std::logic_error with no decision pending.
  int choose(int action);
  // Begin deciding the engine's pending request, if any (after the engine was rebuilt by replay): true if one
  // is pending.
  bool attach();
  // Bring the decision in progress to the point where `chosen` victims were chosen on rows of `targets`
  // nodes (an unpickled environment): the rows are recomputed from them, as choose() does.
  void restore(const std::vector<int>& chosen, const std::vector<int>& targets);

  // ---------------------------------------------------------------- reading
  int job() const { return job_; }  // the TE job being decided, or -1
  int max_candidates() const { return max_candidates_; }
  int observation_size() const { return OBS_HEAD + OBS_ROW * max_candidates_; }
  int64_t n_offered() const { return n_offered_; }  // decisions offered so far
  // (candidate job index, node) of each row; action i chooses row i - 1.
  const std::vector<std::pair<int, int>>& rows() const { return rows_; }
  const std::vector<int>& chosen() const { return chosen_; }    // victims chosen in this attempt, in order
  const std::vector<int>& targets() const { return targets_; }  // their rows' nodes, first choice first
  // StepwiseDecision.observe into out[observation_size()] (all zeros with no decision pending).
  void observe(float* out) const;
  // StepwiseDecision.mask into out[max_candidates + 1].
  void mask(bool* out) const;

  // Every resolve() this object made since the last take_log(), as (nodes, victims) pairs (for pickling the
  // simulation by replay), flattened: n_nodes, n_victims, nodes..., victims... per resolve.
  std::vector<int64_t> take_log();

 private:
  void begin(int job);
  void end();
  void resolve(const std::vector<int64_t>& nodes, const std::vector<int64_t>& victims);
  void compute_room();                 // StepwiseDecision._room
  const double* room_on(int n) const;  // StepwiseDecision._room_on
  void candidate_rows();               // StepwiseDecision._candidate_rows
  int n_fitting() const;               // StepwiseDecision._n_fitting
  bool complete_plan(std::vector<int64_t>& nodes);  // StepwiseDecision._complete_plan

  Engine* engine_;
  int max_candidates_;
  std::vector<double> estimate_;
  double scale_[3], total_[3];
  double head_scale_[OBS_HEAD], row_scale_[OBS_ROW];
  int n_nodes_;

  // The request being decided (the engine's state does not change until it is resolved).
  int job_ = -1;
  std::vector<int> cand_nodes_;             // nodes with candidates, ascending
  std::vector<std::vector<int>> cand_;      // per node: candidates by job index
  int64_t n_be_ = 0;                        // distinct candidate jobs
  std::vector<int> chosen_, targets_;
  std::vector<uint8_t> is_chosen_;          // per job
  std::vector<std::pair<int, int>> rows_;

  // The room of the nodes touched by chosen victims (Python's dict, in insertion order).
  std::vector<double> room_;       // per node, 3 values, meaningful where in_room_
  std::vector<uint8_t> in_room_;   // per node
  std::vector<int> room_nodes_;    // touched nodes, in order of first touch

  std::vector<int64_t> plan_nodes_, plan_victims_;
  std::vector<int64_t> log_;
  int64_t n_offered_ = 0;

  // Scratch space of candidate_rows().
  std::vector<int> feasible_, per_node_off_, per_node_;
  std::vector<uint8_t> seen_;  // per job, for counting distinct candidates
};

}  // namespace schedgym
