// Many environments' decision steps in one call: what PreemptionEnv.step does on the native engine (choose,
// then next_decision once the request is resolved; reward parts from the engine's accrued slowdown; the
// observation, mask and info values), for the N EnvCores of a vector environment
// (schedgym/envs/vector_env.py), with the results written into arrays the caller owns.
//
// PreemptionEnv.step is the specification: step_one() performs its operations in the same order, on the same
// float64 values, so a sub-environment stepped here gives bit-identical results to the single environment.
// Sub-environments share nothing, so they are stepped on a few threads in any order and the results do not
// depend on the number of threads.
//
// Plain C++17, no Python: bindings.cpp wraps it and releases the GIL around the stepping.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "decision.hpp"
#include "engine.hpp"

namespace schedgym {

// The reward settings of EnvConfig a step needs (schedgym.decision.backend.Reward).
struct RewardConfig {
  double te_weight = 1.0;
  double be_weight = 1.0;
  double preemption_cost = 0.0;
  bool bounded = false;  // reward "bounded_slowdown": the engine's accrued_bounded instead of accrued
};

// The arrays a batch step reads and writes, n_envs rows each, row-major; owned by the caller, which keeps
// them alive and leaves them alone while a step runs.
struct BatchBuffers {
  const int64_t* actions = nullptr;  // (n): legal actions, checked by the caller
  const bool* skip = nullptr;        // (n): sub-environments left alone (the caller resets them meanwhile)
  float* obs = nullptr;              // (n, observation_size)
  bool* mask = nullptr;              // (n, max_candidates + 1)
  double* reward = nullptr;          // (n)
  double* parts = nullptr;           // (n, 3): te_slowdown, be_slowdown, preemption
  bool* terminated = nullptr;        // (n): the workload has drained
  bool* resolved = nullptr;          // (n): the step resolved the request and advanced the engine
  double* sim_time = nullptr;        // (n)
  double* interval = nullptr;        // (n): simulated time the step covered
  int64_t* te_job = nullptr;         // (n): index of the TE job being decided, or -1 (done)
  int64_t* n_candidates = nullptr;   // (n): candidate rows (legal actions 0..n_candidates)
  int64_t* preemptions = nullptr;    // (n): preemptions so far in the episode
  // State carried from step to step (set by the caller when it attaches a sub-environment):
  int64_t* decisions = nullptr;      // (n): decisions offered so far (PreemptionEnv.n_decisions)
  double* last_accrued = nullptr;    // (n, 2): accrued (TE, BE) slowdown at the previous step
};

class BatchStepper {
 public:
  // `n_threads` threads step (the caller's included), at most one per sub-environment; 0 picks the hardware's
  // thread count. Throws std::invalid_argument for sizes out of range.
  BatchStepper(int n_envs, int max_candidates, const RewardConfig& reward, int n_threads, const BatchBuffers& buf);
  ~BatchStepper();
  BatchStepper(const BatchStepper&) = delete;
  BatchStepper& operator=(const BatchStepper&) = delete;

  // Sub-environment i steps `core`, which drives `engine`; `mu` (may be null) is taken around its step. Not
  // while a step runs.
  void attach(int i, EnvCore* core, Engine* engine, std::mutex* mu);

  // step() = begin() then finish(). begin() hands the step to the worker threads and returns at once, so that
  // the caller can reset the skipped sub-environments meanwhile; finish() takes part in the stepping and
  // returns when every sub-environment is stepped, rethrowing the first error (by sub-environment index).
  void begin();
  void finish();
  void step() {
    begin();
    finish();
  }

  int n_envs() const { return n_envs_; }
  int n_threads() const { return n_threads_; }
  int observation_size() const { return OBS_HEAD + OBS_ROW * max_candidates_; }
  int max_candidates() const { return max_candidates_; }

 private:
  struct Slot {
    EnvCore* core = nullptr;
    Engine* engine = nullptr;
    std::mutex* mu = nullptr;
  };

  void step_one(int i);
  void work();  // step sub-environments until none is left
  void worker_loop();

  int n_envs_, max_candidates_, n_threads_;
  RewardConfig reward_;
  BatchBuffers buf_;
  std::vector<Slot> slots_;

  // The worker threads (none with one thread): they wait for a new generation, take sub-environments from
  // next_ while the step is open, and report when done. On the heap, so that a forked child, which inherits
  // it without its threads, can leave it undestroyed.
  struct Pool {
    std::vector<std::thread> workers;
    std::mutex mu;
    std::condition_variable wake, done;
    uint64_t generation = 0;
    bool open = false;  // workers may still join the current step
    int busy = 0;       // workers in the current step
    bool stop = false;
  };
  std::unique_ptr<Pool> pool_;
  bool running_ = false;  // between begin() and finish()
  bool pooled_ = false;   // the workers take part in the current step
  long pid_ = 0;          // the process that started the workers
  std::atomic<int> next_{0};
  std::vector<std::exception_ptr> errors_;  // per sub-environment, of the current step
};

}  // namespace schedgym
