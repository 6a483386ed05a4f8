// The native simulation engine: the rules of docs/semantics.md, as schedgym/sim/python_engine.py implements them.
//
// The Python engine is the specification. This class makes the same decisions in the same order and performs
// the same floating-point operations in the same order, so that both give bit-identical results: every
// method below is named after its Python counterpart and mirrors it step by step. Where the two differ in
// *how* (not *what*), a comment says why the result is the same.
//
// Plain C++17, no Python: bindings.cpp wraps it.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "rules.hpp"

namespace schedgym {

// Bumped whenever the engine's behaviour changes; the Python side checks it.
constexpr int ENGINE_VERSION = 6;  // 2: EnvCore; 3: declined TE shapes are offered again only when that could help;
                                  // 4: Engine.clone(), advance/run_declining/run_rule stop at a time `until`,
                                  //    and a per-job restart overhead (restart=); 5: Engine.queued;
                                  // 6: PlanCore (plan_core.hpp)

// Job states, with the values of schedgym.sim.job.JobState.
enum JobStateCode : int8_t { NOT_SUBMITTED = 0, PENDING = 1, RUNNING = 2, PREEMPTING = 3, COMPLETED = 4 };

// The rules of SimConfig (plus the simulator's `preemption` flag).
struct EngineConfig {
  bool priority_queue = true;  // queue "priority" (TE before BE) or "fifo"
  bool backfill = true;
  bool first_fit = false;  // placement "first-fit", else "best-fit"
  int64_t max_preemptions = 1;
  double restart_overhead = 0.0;
  bool preemption = true;  // offer TE jobs that cannot be placed to a preemption policy
};

// A set of small ids (shape ids) with O(1) add, discard and membership test. Python uses `set`s here and
// iterates them in hash order in a few places; every such use gives results that do not depend on the order
// (see schedule_pass), so the arbitrary order of `items` is fine.
class IdSet {
 public:
  void init(int n) {
    pos_.assign(n, -1);
    items_.clear();
  }
  bool has(int x) const { return pos_[x] >= 0; }
  bool empty() const { return items_.empty(); }
  const std::vector<int>& items() const { return items_; }
  void add(int x) {
    if (pos_[x] < 0) {
      pos_[x] = static_cast<int>(items_.size());
      items_.push_back(x);
    }
  }
  void discard(int x) {
    int p = pos_[x];
    if (p < 0) return;
    int last = items_.back();
    items_[p] = last;
    pos_[last] = p;
    items_.pop_back();
    pos_[x] = -1;
  }

 private:
  std::vector<int> items_;
  std::vector<int> pos_;  // index in items_, or -1
};

// A closed run segment (schedgym.sim.metrics.Segment, with end_reason "completed" as a flag).
struct SegmentRows {
  std::vector<int64_t> job, node;
  std::vector<double> start, end;
  std::vector<uint8_t> completed;
};

class Engine {
 public:
  // Arrays are row-major: capacity (n_nodes, 3), member (n_jobs, 3) per-node demand; the rest (n_jobs,).
  // `restart` (n_jobs,) is each job's restart overhead; nullptr: config.restart_overhead for every job.
  // Throws std::invalid_argument for values the Python side would have rejected (so that nothing here can
  // misbehave on them).
  Engine(int n_nodes, const double* capacity, int n_jobs, const double* submit, const double* duration,
         const double* member, const int64_t* gang, const int64_t* job_class, const double* grace,
         const EngineConfig& config, const double* restart = nullptr);

  // A copy is an independent simulation in the same state (every member is a value; bindings.cpp rebinds
  // job_label, which refers to the Python object that owns the engine): Simulator.clone().
  Engine(const Engine&) = default;

  // ---------------------------------------------------------------- driving (Simulator.advance/resolve)
  // Runs until a TE job needs a preemption decision (returns its index) or the workload drains (-1). With
  // `until`, it also stops (-1, not done()) before processing events later than `until`; stopping there
  // changes nothing, so a later advance() continues exactly as if it had not stopped.
  int advance(double until = std::numeric_limits<double>::infinity());
  // The answer to the pending request: empty `nodes` declines. Throws std::invalid_argument (with the
  // Python engine's message) for an illegal plan, std::logic_error if no decision is pending.
  void resolve(const std::vector<int64_t>& nodes, const std::vector<int64_t>& victims);
  // advance(until) and decline every request, to the end (or to `until`).
  void run_declining(double until = std::numeric_limits<double>::infinity());
  // advance(until) and let `rule` answer every request, to the end (or to `until`, or until it has answered
  // `max_decisions` requests if that is >= 0; it then stops right after the last resolve): Simulator.run(policy)
  // for a built-in rule, without calling Python (the rule sees what the Python rule sees in its
  // PreemptionRequest). Returns the number of requests answered.
  int64_t run_rule(Rule& rule, double until = std::numeric_limits<double>::infinity(), int64_t max_decisions = -1);

  // How error messages name a job (Python: repr(job_id)); by default "#<index>".
  std::function<std::string(int)> job_label;

  // ---------------------------------------------------------------- read-only state
  int n_nodes() const { return n_nodes_; }
  int n_jobs() const { return n_jobs_; }
  double now() const { return now_; }
  int64_t n_preemptions() const { return n_preemptions_; }
  int64_t n_requests() const { return n_requests_; }
  bool done() const { return n_done_ == n_jobs_; }
  int pending() const { return request_; }
  int64_t queued_te() const { return n_te_queued_ + static_cast<int64_t>(reserved_.size()); }
  int64_t queued_be() const { return n_be_queued_; }
  const double* accrued() const { return accrued_; }
  const double* accrued_bounded() const { return accrued_bounded_; }
  // What accrued() and accrued_bounded() grow by per simulated second until the next event, (TE, BE).
  const double* rate() const { return rate_; }
  const double* rate_bounded() const { return rate_bounded_; }
  const std::vector<double>& avail() const { return avail_; }
  const std::vector<double>& held() const { return held_; }
  // (node, candidate job indices ascending) for nodes with at least one candidate, nodes ascending.
  std::vector<std::pair<int, std::vector<int>>> candidates() const;
  std::vector<int> running_on(int node) const;  // ascending
  // The up-to-`limit` oldest jobs of each class waiting in the queues (not reserved), each class in queue order
  // (submit time, then index): Simulator.queued. O(shapes + limit * log(shapes + limit)) per class.
  std::pair<std::vector<int>, std::vector<int>> queued(int64_t limit) const;
  std::vector<int> job_nodes(int job) const;    // where it runs, or is reserved
  const std::vector<int8_t>& state() const { return state_; }
  const std::vector<double>& remaining() const { return remaining_; }
  const std::vector<int64_t>& preemptions() const { return preemptions_; }
  const std::vector<double>& run_start() const { return run_start_; }
  const std::vector<double>& run_overhead() const { return run_overhead_; }
  const std::vector<double>& first_start() const { return first_start_; }
  const std::vector<double>& completion() const { return completion_; }
  const std::vector<double>& grace_time() const { return grace_time_; }
  const std::vector<double>& overhead_time() const { return overhead_time_; }
  const std::vector<double>& run_time() const { return run_time_; }
  const SegmentRows& segments() const { return segments_; }

  // Read-only views without copies, for EnvCore (decision.hpp), which reads a request's job and candidates on
  // every decision. Indices are not checked: callers pass valid node and job indices.
  int64_t max_preemptions() const { return config_.max_preemptions; }
  const std::vector<double>& capacity() const { return capacity_; }  // n_nodes x 3, row-major
  const double* member(int job) const { return member_row(job); }  // per-node demand (3 values)
  int gang(int job) const { return gang_[job]; }
  double grace(int job) const { return grace_[job]; }
  double submit(int job) const { return submit_[job]; }
  double duration(int job) const { return duration_[job]; }
  const int* placed_nodes(int job) const { return nodes_of(job); }  // n_placed(job) nodes, placement order
  int n_placed(int job) const { return n_placed_[job]; }
  const std::vector<int>& candidates_on(int node) const { return cand_on_[node]; }  // unordered

 private:
  // An event of the heap (time, kind, seq, job, epoch); kinds order equal times.
  enum Kind : int32_t { COMPLETE = 0, RELEASE = 1, ARRIVE = 2 };
  struct Event {
    double time;
    int32_t kind;
    int32_t job;
    int64_t seq;
    int64_t epoch;
  };
  struct EventAfter {  // heap comparator: the min-heap of (time, kind, seq)
    bool operator()(const Event& a, const Event& b) const {
      if (a.time != b.time) return a.time > b.time;
      if (a.kind != b.kind) return a.kind > b.kind;
      return a.seq > b.seq;
    }
  };
  struct Left {  // a fitting node's leftover after a best-fit placement (rounded), and the node
    double g, c, mem;
    int node;
  };
  struct PassEntry {  // (queue key of the shape's head job, shape) in a scheduling pass
    int job;
    int shape;
  };

  // ---------------------------------------------------------------- events
  void push(double time, Kind kind, int job, int64_t epoch);
  bool has_events() const;
  double next_event_time() const;
  Event pop_event();
  void process_events_at(double t);
  void enqueue(int job);
  void release(int job);
  void hand_over(int job, int n);
  void offer_again(const int* nodes, int k);
  void dequeued(int job);

  // ---------------------------------------------------------------- scheduling pass
  int schedule_pass();
  bool placeable(int shape) const;
  bool place(int job, std::vector<int>& nodes);
  void start(int job, const int* nodes, bool reserved);
  void start_ready_reservations();
  void close_segment(int job, double end, bool completed);

  // ---------------------------------------------------------------- preemption
  void check_plan(int job, const std::vector<int64_t>& nodes, const std::vector<int64_t>& victims) const;
  void apply_plan(int job, const std::vector<int64_t>& nodes, const std::vector<int64_t>& victims);
  void preempt(int victim);

  // ---------------------------------------------------------------- helpers
  bool fits(int n, int shape) const;      // avail[n] >= demand - EPS in every resource
  bool queue_less(int a, int b) const;    // queue order of two jobs (the Python queue key)
  bool shape_q_after(int a, int b) const; // heap comparator of a shape's queue (same shape: (submit, idx))
  std::string label(int job) const;
  double* avail_row(int n) { return &avail_[3 * static_cast<size_t>(n)]; }
  double* held_row(int n) { return &held_[3 * static_cast<size_t>(n)]; }
  const double* member_row(int job) const { return &member_[3 * static_cast<size_t>(job)]; }
  int* nodes_of(int job) { return &node_buf_[node_off_[job]]; }
  const int* nodes_of(int job) const { return &node_buf_[node_off_[job]]; }
  double* owed_of(int job) { return &owed_buf_[3 * static_cast<size_t>(node_off_[job])]; }

  EngineConfig config_;
  int n_nodes_ = 0;
  int n_jobs_ = 0;

  // Cluster, per node (rows of 3): avail + held = what no running or grace-period job occupies.
  std::vector<double> capacity_, avail_, held_;
  std::vector<std::vector<int>> running_on_;  // unordered; sorted when read
  std::vector<std::vector<int>> cand_on_;     // preemption candidates, unordered; sorted when read
  std::vector<std::vector<int>> res_on_;      // reserved jobs per node, oldest first

  // Workload (read-only after construction).
  std::vector<double> submit_, duration_, grace_, member_, inv_duration_, inv_bounded_;
  std::vector<double> restart_;  // restart overhead per job (JobSpec.restart_overhead, else the config's)
  std::vector<int> gang_, class_, shape_;
  std::vector<size_t> node_off_;  // offset of the job's nodes in node_buf_ (and of its owed rows, x3)

  // Runtime state per job (Job in schedgym/sim/job.py).
  std::vector<int8_t> state_;
  std::vector<double> remaining_, run_start_, run_overhead_, first_start_, completion_;
  std::vector<double> grace_time_, overhead_time_, run_time_;
  std::vector<int64_t> preemptions_, epoch_;
  std::vector<int> preempted_for_;
  std::vector<int> n_placed_;     // len(job.nodes): 0 or the gang size
  std::vector<int> node_buf_;     // job.nodes
  std::vector<double> owed_buf_;  // job.owed, meaningful while has_owed_
  std::vector<uint8_t> has_owed_;

  // Shapes: (class, per-node demand, gang size), numbered in order of first appearance.
  std::vector<double> shape_demand_, shape_demand_eps_;
  std::vector<int> shape_k_;
  std::vector<uint8_t> shape_te_;
  std::vector<std::vector<int>> queues_;  // per shape: heap of job indices by queue key
  IdSet blocked_, nonempty_, unknown_;
  // Queued TE shapes declined since the last change that could help them, and those owed an offer.
  IdSet declined_, owed_;

  // Events: the initial arrivals in (submit, index) order, merged with a heap of the events created while
  // running (completions, releases). Same pop order as one heap of all of them: arrivals have the smallest
  // seqs (0..n-1, pushed first in the Python engine) and the largest kind, and no ARRIVE is pushed later.
  std::vector<int> arrivals_;
  size_t next_arrival_ = 0;
  std::vector<Event> events_;
  int64_t seq_ = 0;

  int64_t n_te_queued_ = 0, n_be_queued_ = 0;
  std::vector<int> reserved_;  // TE jobs waiting for their victims' grace periods
  bool in_pass_ = false;
  int request_ = -1;
  int n_done_ = 0;
  int64_t n_preemptions_ = 0, n_requests_ = 0;
  double now_ = 0.0;
  double accrued_[2] = {0.0, 0.0}, accrued_bounded_[2] = {0.0, 0.0};
  double rate_[2] = {0.0, 0.0}, rate_bounded_[2] = {0.0, 0.0};
  SegmentRows segments_;

  // Scratch space of the hot path, kept to avoid allocations.
  std::vector<int> scratch_nodes_, scratch_placeable_, scratch_newly_;
  std::vector<PassEntry> pass_heap_;
  std::vector<Left> scratch_left_;
  std::vector<int> scratch_cands_;
};

}  // namespace schedgym
