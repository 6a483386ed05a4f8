// The native simulation engine: the rules of docs/semantics.md, as schedgym/sim/simulator.py implements them.
#pragma once

namespace schedgym {

// Bumped whenever the engine's behaviour changes; the Python side checks it.
constexpr int ENGINE_VERSION = 1;

}  // namespace schedgym
