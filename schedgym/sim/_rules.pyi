"""schedgym's built-in preemption rules, native"""



def decide(rule: object | None, params: object | None, job: object | None, member: object | None, gang: object | None, avail: object | None, capacity: object | None, candidates: object | None) -> tuple:
    """
    decide(rule, params, job, member, gang, avail, capacity, candidates) -> (nodes, victims)

    The plan of the native rule ``rule`` ("fitgpp" with params lam, grace_scale, order, rank, or "k8s"
    with none) for one preemption request: member (3,) is the job's per-node demand, avail and capacity
    are (n_nodes, 3), candidates is [(node, [(idx, (gpus, cpus, mem_gb), gang, grace, run_start), ...]), ...]
    with nodes ascending and candidates by idx. An empty plan ((), ()) declines. Bad input: ValueError.

    "random" takes params {"rng": a numpy Generator over PCG64}: it draws from it as the Python rule
    would, and leaves it where the Python rule would.
    """

def pcg64_draws(rng: object, draws: object) -> list:
    """
    pcg64_draws(rng, draws) -> values

    The random rule's draws from the numpy Generator rng (over PCG64), which then stands where they leave
    it: ("random",), ("permutation", n), ("uint64",), ("uint32",) or ("interval", max) each.
    """
