// The built-in preemption rules in C++: baselines/fitgpp.py and baselines/k8s.py, decision for decision.
#pragma once
