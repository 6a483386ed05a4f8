// The built-in preemption rules in C++ (see rules.hpp). Every function mirrors its Python counterpart in
// baselines/base.py, baselines/fitgpp.py, baselines/k8s.py and baselines/random_policy.py step by step; comments
// name the Python line a construct stands for where the correspondence is not obvious.
#include "rules.hpp"

#include "resources.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

// Python rounds every product and sum on its own: no fused multiply-add, whatever the target (aarch64 has FMA
// in its base ISA, and both GCC and Clang contract a * b + c there by default).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#elif defined(_MSC_VER)
#pragma fp_contract(off)
#endif

namespace schedgym {

namespace {

// base.take_until_covered: cands[pos] for pos in `order`, appended to `victims` until what they free covers
// `deficit`. freed(victims) is a left fold from 0.0, so a running sum gives the same values at each step.
inline void take_until_covered(const std::vector<Candidate>& cands, const std::vector<int>& order,
                               const double deficit[3], std::vector<int>& victims) {
  double g = 0.0, c = 0.0, m = 0.0;
  for (int p : order) {
    victims.push_back(p);
    const double* d = cands[p].demand;
    g += d[0];
    c += d[1];
    m += d[2];
    if (covers3(g, c, m, deficit)) break;
  }
}

// base.freed over cands[pos] for pos in positions (summed from 0.0 in that order), skipping position `skip`.
inline void freed(const std::vector<Candidate>& cands, const std::vector<int>& positions, int skip, double out[3]) {
  double g = 0.0, c = 0.0, m = 0.0;
  for (int p : positions) {
    if (p == skip) continue;
    const double* d = cands[p].demand;
    g += d[0];
    c += d[1];
    m += d[2];
  }
  out[0] = g;
  out[1] = c;
  out[2] = m;
}

// A Python tuple of up to three numbers (the keys below): a < b as Python decides it, i.e. at the first
// position where the elements differ (by ==), by <; if none differs, the shorter tuple is smaller.
inline bool tuple_less(const double* a, int na, const double* b, int nb) {
  const int n = na < nb ? na : nb;
  for (int i = 0; i < n; ++i) {
    if (!(a[i] == b[i])) return a[i] < b[i];
  }
  return na < nb;
}

inline bool tuple_equal(const double* a, int na, const double* b, int nb) {
  if (na != nb) return false;
  for (int i = 0; i < na; ++i) {
    if (!(a[i] == b[i])) return false;
  }
  return true;
}

// base.prune: drop victims, last chosen first, that are not needed to cover `deficit`.
void prune(const std::vector<Candidate>& cands, std::vector<int>& victims, const double deficit[3]) {
  std::vector<int> kept = victims;
  double have[3];
  for (auto it = victims.rbegin(); it != victims.rend(); ++it) {
    freed(cands, kept, *it, have);  // freed([u for u in kept if u is not v])
    if (covers(have, deficit)) kept.erase(std::find(kept.begin(), kept.end(), *it));
  }
  victims.swap(kept);
}

// ----------------------------------------------------------------------------------------------------------
// FitGpp
// ----------------------------------------------------------------------------------------------------------

// fitgpp._norm: L2 norm of (have - need) / cap.
inline double norm(const double have[3], const double need[3], const double cap[3]) {
  const double x = (have[0] - need[0]) / cap[0];
  const double y = (have[1] - need[1]) / cap[1];
  const double z = (have[2] - need[2]) / cap[2];
  return std::sqrt(x * x + y * y + z * z);
}

// fitgpp._greedy_fit, with victims as positions into `cands`.
void greedy_fit(const double deficit[3], const std::vector<Candidate>& cands, const double cap[3],
                std::vector<int>& chosen) {
  std::vector<int> pool(cands.size());
  for (size_t i = 0; i < pool.size(); ++i) pool[i] = static_cast<int>(i);
  double m0 = deficit[0], m1 = deficit[1], m2 = deficit[2];
  const double c0 = cap[0], c1 = cap[1], c2 = cap[2];
  chosen.clear();
  while (!pool.empty() && (m0 > EPS || m1 > EPS || m2 > EPS)) {
    int best = -1;  // position in pool
    double best_key[3] = {0.0, 0.0, 0.0};
    for (size_t j = 0; j < pool.size(); ++j) {
      const Candidate& c = cands[pool[j]];
      const double d0 = c.demand[0], d1 = c.demand[1], d2 = c.demand[2];
      if (d0 >= m0 - EPS && d1 >= m1 - EPS && d2 >= m2 - EPS) {
        const double x = (d0 - m0) / c0, y = (d1 - m1) / c1, z = (d2 - m2) / c2;
        const double key[3] = {std::sqrt(x * x + y * y + z * z), c.grace, static_cast<double>(c.idx)};
        if (best < 0 || tuple_less(key, 3, best_key, 3)) {
          best = static_cast<int>(j);
          std::copy(key, key + 3, best_key);
        }
      }
    }
    if (best < 0) {  // nobody covers the rest alone: max(pool, key=...) -- the first maximal candidate
      for (size_t j = 0; j < pool.size(); ++j) {
        const Candidate& c = cands[pool[j]];
        const double key[3] = {
            py_min(c.demand[0], m0) / c0 + py_min(c.demand[1], m1) / c1 + py_min(c.demand[2], m2) / c2,
            -c.grace, -static_cast<double>(c.idx)};
        if (best < 0 || tuple_less(best_key, 3, key, 3)) {  // max() replaces only on key > best
          best = static_cast<int>(j);
          std::copy(key, key + 3, best_key);
        }
      }
    }
    const Candidate& b = cands[pool[best]];
    chosen.push_back(pool[best]);
    pool.erase(pool.begin() + best);
    m0 = max0(m0 - b.demand[0]);
    m1 = max0(m1 - b.demand[1]);
    m2 = max0(m2 - b.demand[2]);
  }
}

class FitGppRule final : public NodeByNodeRule {
 public:
  FitGppRule(double lam, double grace_scale, bool order_grace, bool rank_grace)
      : lam_(lam), grace_scale_(grace_scale), order_grace_(order_grace), rank_grace_(rank_grace) {}

 protected:
  bool evaluate_node(const RequestView& r, int node, const double deficit[3], const std::vector<Candidate>& cands,
                     Score& score, std::vector<int>& victims) override {
    const double* row = r.capacity + 3 * static_cast<size_t>(node);
    // row[i] or 1.0: a zero capacity (a node without CPUs, say) divides by 1 instead.
    const double cap[3] = {row[0] == 0.0 ? 1.0 : row[0], row[1] == 0.0 ? 1.0 : row[1], row[2] == 0.0 ? 1.0 : row[2]};
    victims.clear();
    if (!order_grace_) {
      greedy_fit(deficit, cands, cap, victims);
    } else {
      // sorted(candidates, key=(grace_period, idx)), taken until freed(victims) covers the deficit.
      order_.resize(cands.size());
      for (size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int>(i);
      std::stable_sort(order_.begin(), order_.end(), [&cands](int a, int b) {
        const double ka[2] = {cands[a].grace, static_cast<double>(cands[a].idx)};
        const double kb[2] = {cands[b].grace, static_cast<double>(cands[b].idx)};
        return tuple_less(ka, 2, kb, 2);
      });
      take_until_covered(cands, order_, deficit, victims);
    }
    if (victims.size() > 1) prune(cands, victims, deficit);
    double f0 = 0.0, f1 = 0.0, f2 = 0.0;
    for (int p : victims) {
      const double k = static_cast<double>(cands[p].gang);  // a gang victim frees its share on every node
      const double* d = cands[p].demand;
      f0 += d[0] * k;
      f1 += d[1] * k;
      f2 += d[2] * k;
    }
    const double have[3] = {f0, f1, f2};
    const double fitness = norm(have, deficit, cap);
    double max_grace = cands[victims[0]].grace;  // max(): the first maximal one
    for (size_t i = 1; i < victims.size(); ++i) {
      const double g = cands[victims[i]].grace;
      if (g > max_grace) max_grace = g;
    }
    const double n_victims = static_cast<double>(victims.size());
    if (rank_grace_) {
      score.size = 3;
      score.v[0] = max_grace;
      score.v[1] = fitness;
      score.v[2] = n_victims;
    } else {
      score.size = 2;
      score.v[0] = fitness + lam_ * max_grace / grace_scale_;
      score.v[1] = n_victims;
      score.v[2] = 0.0;
    }
    return true;
  }

 private:
  double lam_, grace_scale_;
  bool order_grace_, rank_grace_;
  std::vector<int> order_;  // scratch
};

// ----------------------------------------------------------------------------------------------------------
// Kubernetes-like
// ----------------------------------------------------------------------------------------------------------

class K8sRule final : public NodeByNodeRule {
 protected:
  bool evaluate_node(const RequestView& /*r*/, int /*node*/, const double deficit[3],
                     const std::vector<Candidate>& cands, Score& score, std::vector<int>& victims) override {
    victims.resize(cands.size());
    for (size_t i = 0; i < victims.size(); ++i) victims[i] = static_cast<int>(i);
    // Reprieve by sorted(candidates, key=(run_start, idx)): keep each one the job can spare.
    order_ = victims;
    std::stable_sort(order_.begin(), order_.end(), [&cands](int a, int b) {
      const double ka[2] = {cands[a].run_start, static_cast<double>(cands[a].idx)};
      const double kb[2] = {cands[b].run_start, static_cast<double>(cands[b].idx)};
      return tuple_less(ka, 2, kb, 2);
    });
    double have[3];
    for (int c : order_) {
      freed(cands, victims, c, have);  // freed([v for v in victims if v is not c])
      if (covers(have, deficit)) victims.erase(std::find(victims.begin(), victims.end(), c));
    }
    double earliest = cands[victims[0]].run_start;  // min(): the first minimal one
    for (size_t i = 1; i < victims.size(); ++i) {
      const double s = cands[victims[i]].run_start;
      if (s < earliest) earliest = s;
    }
    score.size = 2;
    score.v[0] = static_cast<double>(victims.size());
    score.v[1] = -earliest;
    score.v[2] = 0.0;
    return true;
  }

 private:
  std::vector<int> order_;  // scratch
};

}  // namespace

// ----------------------------------------------------------------------------------------------------------
// Random
// ----------------------------------------------------------------------------------------------------------

bool RandomRule::evaluate_node(const RequestView& /*r*/, int /*node*/, const double deficit[3],
                               const std::vector<Candidate>& cands, Score& score, std::vector<int>& victims) {
  // The draws in the Python rule's order: the permutation first, the score after the victims.
  rng_.permutation(cands.size(), order_);
  victims.clear();
  take_until_covered(cands, order_, deficit, victims);
  score.size = 1;
  score.v[0] = rng_.next_double();
  score.v[1] = 0.0;
  score.v[2] = 0.0;
  return true;
}

bool score_less(const Score& a, const Score& b) { return tuple_less(a.v, a.size, b.v, b.size); }

// ----------------------------------------------------------------------------------------------------------
// NodeByNodePolicy._decide
// ----------------------------------------------------------------------------------------------------------

Plan NodeByNodeRule::decide(const RequestView& r) {
  const double* need = r.member;
  const long long k = r.gang;
  feasible_.clear();
  options_.clear();
  double have[3];
  std::vector<int> all;
  for (const auto& entry : r.candidates) {
    const int n = entry.first;
    const std::vector<Candidate>& cands = entry.second;
    const double* a = r.avail + 3 * static_cast<size_t>(n);
    // Room without preemption (a gang's, below): the same test as there, so no node is offered twice.
    if (covers(a, need)) continue;
    Feasible f{n, {}, &cands};
    shortfall(a, need, f.deficit);
    all.resize(cands.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    freed(cands, all, -1, have);
    if (covers(have, f.deficit)) feasible_.push_back(f);
  }
  if (k > 1) {
    // fits_on(avail, member): nodes that already have room cost a gang nothing.
    for (int n = 0; n < r.n_nodes; ++n) {
      const double* a = r.avail + 3 * static_cast<size_t>(n);
      if (a[0] >= need[0] - EPS && a[1] >= need[1] - EPS && a[2] >= need[2] - EPS) {
        Option o;
        o.score.size = 1;
        o.score.v[0] = -std::numeric_limits<double>::infinity();
        o.node = n;
        o.cands = nullptr;
        options_.push_back(std::move(o));
      }
    }
  }
  if (static_cast<long long>(options_.size() + feasible_.size()) < k) return Plan{};
  for (const Feasible& f : feasible_) {
    Option o;
    o.node = f.node;
    o.cands = f.cands;
    if (evaluate_node(r, f.node, f.deficit, *f.cands, o.score, o.victims)) options_.push_back(std::move(o));
  }
  if (static_cast<long long>(options_.size()) < k) return Plan{};
  // options.sort(key=lambda o: (o[0], o[1])): stable, by score then node.
  std::stable_sort(options_.begin(), options_.end(), [](const Option& a, const Option& b) {
    if (!tuple_equal(a.score.v, a.score.size, b.score.v, b.score.size)) return score_less(a.score, b.score);
    return a.node < b.node;
  });
  Plan plan;
  plan.nodes.reserve(static_cast<size_t>(k));
  for (long long i = 0; i < k; ++i) {
    const Option& o = options_[static_cast<size_t>(i)];
    plan.nodes.push_back(o.node);
    for (int p : o.victims) {
      const int idx = (*o.cands)[p].idx;
      if (std::find(plan.victims.begin(), plan.victims.end(), idx) == plan.victims.end()) plan.victims.push_back(idx);
    }
  }
  if (plan.victims.empty()) return Plan{};  // room exists without preemption; the job will be placed normally
  return plan;
}

// ----------------------------------------------------------------------------------------------------------
// Factories
// ----------------------------------------------------------------------------------------------------------

std::unique_ptr<Rule> make_fitgpp(double lam, double grace_scale, bool order_grace, bool rank_grace) {
  if (!(std::isfinite(lam) && lam >= 0)) throw std::invalid_argument("Expected lam >= 0, got " + std::to_string(lam));
  if (!(std::isfinite(grace_scale) && grace_scale > 0))
    throw std::invalid_argument("Expected grace_scale > 0, got " + std::to_string(grace_scale));
  return std::make_unique<FitGppRule>(lam, grace_scale, order_grace, rank_grace);
}

std::unique_ptr<Rule> make_k8s() { return std::make_unique<K8sRule>(); }

}  // namespace schedgym
