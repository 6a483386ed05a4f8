// The built-in preemption rules in C++: baselines/fitgpp.py, baselines/k8s.py and baselines/random_policy.py,
// decision for decision (the random rule draw for draw, from numpy's generator: pcg64.hpp).
//
// The Python rules are the specification. These classes take the same decisions with the same floating-point
// operations in the same order (sums of demands in candidate order, the same L2 expressions, max(x, 0.0) as
// Python's max), compare scores as Python compares tuples, and break ties as Python's stable sort, min and max
// do. tests/test_native_rules.py holds them to the Python rules request by request.
//
// Plain C++17, no Python: rules_bindings.cpp wraps them for the tests; the engine calls them directly.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "pcg64.hpp"

namespace schedgym {

struct Candidate {    // a running preemptible BE job on a node
  int idx;            // job index
  double demand[3];   // per-node demand (gpus, cpus, mem_gb)
  int gang;           // its gang size (a gang victim appears on each of its nodes)
  double grace;       // grace period (s)
  double run_start;   // start of its current run segment
};

struct RequestView {       // what a rule sees (like PreemptionRequest)
  int job;                 // the waiting TE job's index
  double member[3];        // its per-node demand
  int gang;                // its gang size
  int n_nodes;
  const double* avail;     // n_nodes x 3, row-major: what the job could use now
  const double* capacity;  // n_nodes x 3
  std::vector<std::pair<int, std::vector<Candidate>>> candidates;  // nodes ascending, candidates by idx
};

struct Plan {  // empty nodes = decline
  std::vector<int> nodes;
  std::vector<int> victims;
};

class Rule {
 public:
  virtual ~Rule() = default;
  virtual Plan decide(const RequestView& r) = 0;
};

// fitgpp (order_grace: order "grace", else "fit"; rank_grace: rank "grace", else "score"). Throws
// std::invalid_argument for lam < 0 or grace_scale <= 0 (or either not finite), as FitGpp raises ConfigError.
std::unique_ptr<Rule> make_fitgpp(double lam, double grace_scale, bool order_grace, bool rank_grace);
std::unique_ptr<Rule> make_k8s();

// A node's score: a Python tuple of up to three numbers (ints are exact as doubles at these sizes), compared
// as Python compares tuples: lexicographically, a proper prefix being smaller.
struct Score {
  int size = 0;
  double v[3] = {0.0, 0.0, 0.0};
};
bool score_less(const Score& a, const Score& b);

// baselines/base.py's NodeByNodePolicy: every node is evaluated on its own; the k best options (a gang may use
// nodes that already have room, score (-inf,)) are taken, sorted by (score, node); the plan is the union of
// their victims. Subclasses implement evaluate_node only.
class NodeByNodeRule : public Rule {
 public:
  Plan decide(const RequestView& r) override;

 protected:
  // _evaluate_node: for a node lacking `deficit` (> EPS in some resource) whose `cands` together cover it,
  // set `score` and the victims (as positions into `cands`, in the order Python's list holds them) and
  // return true; return false for Python's None (no option on this node).
  virtual bool evaluate_node(const RequestView& r, int node, const double deficit[3],
                             const std::vector<Candidate>& cands, Score& score, std::vector<int>& victims) = 0;

 private:
  struct Feasible {
    int node;
    double deficit[3];
    const std::vector<Candidate>* cands;
  };
  struct Option {
    Score score;
    int node;
    const std::vector<Candidate>* cands;  // null for a node with room (no victims)
    std::vector<int> victims;             // positions into *cands
  };
  std::vector<Feasible> feasible_;  // scratch, reused across requests
  std::vector<Option> options_;
};

// random (baselines/random_policy.py): per node, candidates in the order of a random permutation until they
// cover the deficit, and a uniform random score. It draws from `rng`, which starts where the Python rule's
// Generator stands; rng().state() is where that Generator would stand after the same decisions.
class RandomRule final : public NodeByNodeRule {
 public:
  explicit RandomRule(const Pcg64State& state) : rng_(state) {}
  const Pcg64& rng() const { return rng_; }

 protected:
  bool evaluate_node(const RequestView& r, int node, const double deficit[3], const std::vector<Candidate>& cands,
                     Score& score, std::vector<int>& victims) override;

 private:
  Pcg64 rng_;
  std::vector<int> order_;  // scratch
};

}  // namespace schedgym
