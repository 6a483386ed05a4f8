// Many environments' decision steps in one call; see batch.hpp.
#include "batch.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif
#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

namespace {

// The process id, where there is fork(): a child forked from a process that has a stepper has its memory but
// not its worker threads.
long process_id() {
#if defined(__unix__) || defined(__APPLE__)
  return static_cast<long>(getpid());
#else
  return 0;
#endif
}

}  // namespace

namespace schedgym {

BatchStepper::BatchStepper(int n_envs, int max_candidates, const RewardConfig& reward, int n_threads,
                           const BatchBuffers& buf)
    : n_envs_(n_envs), max_candidates_(max_candidates), reward_(reward), buf_(buf) {
  if (n_envs < 1) throw std::invalid_argument("Expected n_envs >= 1, got " + std::to_string(n_envs));
  if (max_candidates < 1)
    throw std::invalid_argument("Expected max_candidates >= 1, got " + std::to_string(max_candidates));
  if (n_threads < 0) throw std::invalid_argument("Expected n_threads >= 0, got " + std::to_string(n_threads));
  if (n_threads == 0) n_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  // More threads than sub-environments would only wait.
  n_threads_ = std::min(n_threads, n_envs);
  slots_.resize(n_envs);
  errors_.resize(n_envs);
  pid_ = process_id();
  if (n_threads_ > 1) {
    pool_ = std::make_unique<Pool>();
    for (int t = 1; t < n_threads_; ++t) pool_->workers.emplace_back(&BatchStepper::worker_loop, this);
  }
}

BatchStepper::~BatchStepper() {
  if (!pool_) return;
  if (process_id() != pid_) {
    // A forked child: the workers live in the parent only. Joining them would abort, and destroying the
    // condition variables they wait on would block forever, so the pool is left undestroyed (a small leak,
    // in a process that inherited it).
    pool_.release();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(pool_->mu);
    pool_->stop = true;
  }
  pool_->wake.notify_all();
  for (std::thread& t : pool_->workers) t.join();
}

void BatchStepper::attach(int i, EnvCore* core, Engine* engine, std::mutex* mu) {
  if (i < 0 || i >= n_envs_) throw std::out_of_range("sub-environment " + std::to_string(i) + " out of range");
  if (running_) throw std::logic_error("attach() called while a step runs");
  if (core == nullptr || engine == nullptr) throw std::invalid_argument("attach() needs a core and its engine");
  if (core->max_candidates() != max_candidates_)
    throw std::invalid_argument("Expected a core with max_candidates " + std::to_string(max_candidates_) + ", got " +
                                std::to_string(core->max_candidates()));
  slots_[i] = Slot{core, engine, mu};
}

// ==================================================================== the pool

void BatchStepper::begin() {
  if (running_) throw std::logic_error("begin() called while a step runs");
  for (int i = 0; i < n_envs_; ++i) {
    errors_[i] = nullptr;
    if (!buf_.skip[i] && slots_[i].core == nullptr)
      throw std::logic_error("sub-environment " + std::to_string(i) + " has no core attached");
  }
  next_.store(0);
  running_ = true;
  pooled_ = pool_ && process_id() == pid_;  // a forked child steps alone
  if (!pooled_) return;
  {
    std::lock_guard<std::mutex> lock(pool_->mu);
    ++pool_->generation;
    pool_->open = true;
  }
  pool_->wake.notify_all();
}

void BatchStepper::finish() {
  if (!running_) throw std::logic_error("finish() called without begin()");
  work();
  if (pooled_) {
    // Every sub-environment has been taken; wait only for the workers still stepping one. A worker that has
    // not woken up yet (on a busy machine) finds the step closed and goes back to sleep.
    Pool& p = *pool_;
    std::unique_lock<std::mutex> lock(p.mu);
    p.open = false;
    p.done.wait(lock, [&p] { return p.busy == 0; });
  }
  running_ = false;
  for (int i = 0; i < n_envs_; ++i)
    if (errors_[i]) std::rethrow_exception(errors_[i]);
}

void BatchStepper::work() {
  // Sub-environments are handed out one at a time: their steps vary in cost (one may run thousands of events
  // before its next decision), and each is independent, so the order they are taken in changes nothing.
  for (int i; (i = next_.fetch_add(1)) < n_envs_;) {
    if (buf_.skip[i]) continue;
    try {
      step_one(i);
    } catch (...) {
      errors_[i] = std::current_exception();
    }
  }
}

void BatchStepper::worker_loop() {
#if defined(__linux__)
  // SCHED_BATCH: a worker woken by begin() does not preempt the thread that woke it. On a machine whose cores
  // are all busy it would otherwise often take the caller's core, and the caller's Python (the resets that
  // begin() is there to overlap) would wait for it. Best effort: the policy changes nothing else.
  sched_param param{};
  pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);
#endif
  Pool& p = *pool_;
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(p.mu);
      p.wake.wait(lock, [&] { return p.stop || p.generation != seen; });
      if (p.stop) return;
      seen = p.generation;
      if (!p.open) continue;  // the caller already stepped everything
      ++p.busy;
    }
    work();
    {
      std::lock_guard<std::mutex> lock(p.mu);
      if (--p.busy == 0) p.done.notify_one();
    }
  }
}

// ==================================================================== one step

void BatchStepper::step_one(int i) {
  const Slot& s = slots_[i];
  std::unique_lock<std::mutex> lock;
  if (s.mu != nullptr) lock = std::unique_lock<std::mutex>(*s.mu);
  EnvCore& core = *s.core;
  const Engine& e = *s.engine;
  const size_t row = static_cast<size_t>(i);

  // PreemptionEnv.step, on the native engine.
  const double start = e.now();
  int64_t n_preempted = 0;
  bool resolved = false;
  if (core.job() >= 0) {  // else an episode without any decision: this step only ends it
    int n = core.choose(static_cast<int>(buf_.actions[i]));
    if (n >= 0) {  // resolved (0: declined)
      n_preempted = n;
      resolved = true;
      if (core.next_decision()) ++buf_.decisions[i];
    }
  }
  // schedgym.decision.backend.Reward.parts: the slowdown accrued since the previous step, by class, and the preemptions.
  const double* acc = reward_.bounded ? e.accrued_bounded() : e.accrued();
  double* last = buf_.last_accrued + 2 * row;
  const double te = acc[0] - last[0], be = acc[1] - last[1];
  last[0] = acc[0];
  last[1] = acc[1];
  double* parts = buf_.parts + 3 * row;
  parts[0] = -reward_.te_weight * te;
  parts[1] = -reward_.be_weight * be;
  parts[2] = -reward_.preemption_cost * static_cast<double>(n_preempted);
  buf_.reward[i] = parts[0] + parts[1] + parts[2];

  core.observe(buf_.obs + row * static_cast<size_t>(observation_size()));
  core.mask(buf_.mask + row * static_cast<size_t>(max_candidates_ + 1));
  buf_.terminated[i] = core.job() < 0;  // next_decision() found none: the workload has drained
  buf_.resolved[i] = resolved;
  buf_.sim_time[i] = e.now();
  buf_.interval[i] = e.now() - start;
  buf_.te_job[i] = core.job();
  buf_.n_candidates[i] = static_cast<int64_t>(core.rows().size());
  buf_.preemptions[i] = e.n_preemptions();
}

}  // namespace schedgym
