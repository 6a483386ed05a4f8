"""The simulator's rules, one behaviour per test, on tiny hand-built workloads.

Every expected number is computed by hand in the comment next to it. Unless a test says otherwise jobs use
GPUs only, nodes have 8 GPUs, and preemptions are decided by a scripted policy (``helpers.Scripted``):
``script={"te": ([node], ["victim"])}`` means "when TE job ``te`` asks, reserve ``node`` and preempt
``victim``"; any other request is declined.
"""

from __future__ import annotations

import math

import pytest
from helpers import be, cluster, te

from schedgym.sim import JobState, PreemptionPlan, SimConfig, Simulator
from schedgym.sim.job import JobSpec

# ----------------------------------------------------------------------------------------------------------
# Preemption with a grace period
# ----------------------------------------------------------------------------------------------------------

# One 8-GPU node. "bj" (BE, 8 GPUs, 1000 s, grace 30) runs from 0. "tj" (TE, 4 GPUs, 100 s) arrives at 100
# and is given bj: bj enters PREEMPTING at 100 and releases at 100 + 30 = 130.
GRACE_JOBS = [be("bj", 0, 1000, 8, grace=30), te("tj", 100, 100, 4)]
GRACE_SCRIPT = {"tj": ([0], ["bj"])}


def test_victim_segment_ends_at_preemption_instant(run, one_node):
    v, _, _ = run(one_node, GRACE_JOBS, GRACE_SCRIPT)
    # bj's first run is [0, 100), cut at the preemption instant, not at the end of its grace period.
    assert v.segments("bj")[0] == (0, 0.0, 100.0, "preempted")


def test_te_starts_when_victim_grace_period_ends(run, one_node):
    v, _, _ = run(one_node, GRACE_JOBS, GRACE_SCRIPT)
    # release = 100 + grace 30 = 130; tj starts then and ends at 130 + 100 = 230.
    assert v["tj"].first_start == 130.0
    assert v["tj"].completion == 230.0
    # slowdown = (230 - 100) / 100 = 1.3; wait = 230 - 100 - 100 = 30 (the grace period).
    assert v["tj"].slowdown == pytest.approx(1.3)
    assert v["tj"].wait == pytest.approx(30.0)


def test_victim_resumes_with_remaining_work(run, one_node):
    v, _, sim = run(one_node, GRACE_JOBS, GRACE_SCRIPT)
    # bj made 100 s of progress, so 900 s remain. At 130 only 8 - 4 = 4 GPUs are free (tj runs), bj needs 8:
    # it restarts when tj completes at 230 and completes at 230 + 900 = 1130.
    assert v.segments("bj") == [(0, 0.0, 100.0, "preempted"), (0, 230.0, 1130.0, "completed")]
    assert v["bj"].completion == 1130.0
    assert v["bj"].preemptions == 1
    assert v["bj"].grace_time == 30.0
    # run_time = 100 + 900 = 1000; wait = 1130 - 0 - 1000 = 130; slowdown = 1130 / 1000 = 1.13.
    assert v["bj"].run_time == pytest.approx(1000.0)
    assert v["bj"].wait == pytest.approx(130.0)
    assert v["bj"].slowdown == pytest.approx(1.13)
    assert sim.n_preemptions == 1


def test_victim_keeps_resources_and_makes_no_progress_during_grace():
    # Same as above plus "probe" (TE, 8 GPUs) arriving at 115, inside bj's grace period [100, 130). Its request
    # is a chance to look at the simulator mid-grace through the step API.
    jobs = [*GRACE_JOBS, te("probe", 115, 10, 8)]
    sim = Simulator(cluster(8), jobs, SimConfig())
    req = sim.advance()
    assert req.job.job_id == "tj" and req.now == 100.0
    sim.resolve(PreemptionPlan(nodes=(0,), victims=(0,)))
    req = sim.advance()
    assert req.job.job_id == "probe" and req.now == 115.0
    bj = sim.jobs[0]
    assert bj.state == JobState.PREEMPTING
    # bj still holds all 8 GPUs: free = 8 - 8 = 0, and nothing is available to the probe.
    assert sim.unused[0, 0] == 0.0
    assert req.avail[0, 0] <= 0.0
    # bj is PREEMPTING, so nobody is a candidate; its remaining work was frozen at 1000 - 100 = 900.
    assert req.candidates == {}
    assert bj.remaining == 900.0
    sim.resolve(PreemptionPlan())


def test_grace_zero_releases_at_the_same_instant(run, one_node):
    jobs = [be("bj", 0, 1000, 8, grace=0), te("tj", 100, 100, 4)]
    v, _, _ = run(one_node, jobs, {"tj": ([0], ["bj"])})
    # Released at 100 + 0 = 100: tj runs [100, 200); bj (900 s left) restarts at 200 and ends at 1100.
    assert v["tj"].first_start == 100.0
    assert v["tj"].completion == 200.0
    assert v["bj"].grace_time == 0.0
    assert v.segments("bj") == [(0, 0.0, 100.0, "preempted"), (0, 200.0, 1100.0, "completed")]


def test_preempted_job_keeps_its_submit_time_for_queue_order(run, one_node):
    # "bj" (BE, 8 GPUs, submit 0, 1000 s, grace 0) is preempted at 100 by "tj" (TE, 8 GPUs, 100 s).
    # "late" (BE, 8 GPUs, submit 50, 10 s) waits from 50. When tj ends at 200 both BE jobs need the whole node:
    # bj goes first because it keeps submit time 0 < 50: bj runs [200, 1100), late [1100, 1110).
    jobs = [be("bj", 0, 1000, 8), be("late", 50, 10, 8), te("tj", 100, 100, 8)]
    v, _, _ = run(one_node, jobs, {"tj": ([0], ["bj"])})
    assert v.segments("bj")[1] == (0, 200.0, 1100.0, "completed")
    assert v["late"].first_start == 1100.0


def test_remaining_work_is_duration_minus_progress(run, one_node):
    # bj (BE, 8 GPUs, 1000 s, grace 0) runs from 0; tj (TE, 8 GPUs, 100 s) at 10 preempts it after 10 s of
    # progress: remaining = 1000 - 10 = 990. tj [10, 110); bj resumes [110, 110 + 990 = 1100).
    jobs = [be("bj", 0, 1000, 8), te("tj", 10, 100, 8)]
    v, _, _ = run(one_node, jobs, {"tj": ([0], ["bj"])})
    assert v.segments("bj") == [(0, 0.0, 10.0, "preempted"), (0, 110.0, 1100.0, "completed")]


# ----------------------------------------------------------------------------------------------------------
# Reservation
# ----------------------------------------------------------------------------------------------------------

# One 8-GPU node running b0 (4 GPUs, grace 50) and b1 (4 GPUs, grace 10). "tj" (TE, 8 GPUs, 100 s) arrives at
# 100 and preempts both: b1 releases at 110, b0 at 150. "late" (BE, 4 GPUs, 100 s) arrives at 120, when the 4
# GPUs freed by b1 are free but held for tj.
RESERVE_JOBS = [
    be("b0", 0, 1000, 4, grace=50),
    be("b1", 0, 1000, 4, grace=10),
    te("tj", 100, 100, 8),
    be("late", 120, 100, 4),
]


def test_reserved_resources_are_not_given_to_a_be_arrival(run, one_node):
    v, _, _ = run(one_node, RESERVE_JOBS, {"tj": ([0], ["b0", "b1"])})
    # tj starts at max(110, 150) = 150 and runs [150, 250).
    assert v["tj"].first_start == 150.0
    assert v["tj"].completion == 250.0
    # late may not use b1's freed GPUs during [120, 150). At 250 the queue is b0 (submit 0), b1 (submit 0,
    # higher index), late (120): b0 and b1 take 4 + 4 GPUs and run their 900 s left until 1150; late starts
    # at 1150.
    assert v["b0"].completion == 1150.0
    assert v["b1"].completion == 1150.0
    assert v["late"].first_start == 1150.0


def test_be_arrival_during_grace_uses_other_free_resources(run, two_nodes):
    # Two 8-GPU nodes, first fit. At 0: b0 (2 GPUs, grace 50) -> n0; b1 (6 GPUs, grace 10) -> n0 (6 left there);
    # b2 (4 GPUs) -> n1 (n0 is full). At 100 tj (TE, 8 GPUs, 100 s) reserves n0 by preempting b0 and b1.
    # At 110 b1 is released and re-queued: n0 has 6 free GPUs but they are held for tj (owed to it), and
    # n1 has only 4, so b1 waits. At 120 "late" (BE, 4 GPUs, 100 s) arrives: n0 is first in node order and
    # has 6 free GPUs, but they are held; n1 has 4 unreserved GPUs: late runs [120, 220) on n1.
    jobs = [
        be("b0", 0, 1000, 2, grace=50),
        be("b1", 0, 1000, 6, grace=10),
        be("b2", 0, 1000, 4),
        te("tj", 100, 100, 8),
        be("late", 120, 100, 4),
    ]
    v, _, _ = run(two_nodes, jobs, {"tj": ([0], ["b0", "b1"])}, placement="first-fit")
    assert v.segments("late") == [(1, 120.0, 220.0, "completed")]
    # tj starts at max(100 + 50, 100 + 10) = 150 on n0.
    assert v.segments("tj") == [(0, 150.0, 250.0, "completed")]
    # b1 did not grab n0 between 110 and 150: its second run starts when tj ends and frees n0 (250).
    assert v.segments("b1")[1][1] == 250.0


def test_te_job_is_offered_before_later_jobs_take_free_resources(run, one_node):
    # One 8-GPU node: x (BE, 4 GPUs, 1000 s, grace 20) runs from 0, 4 GPUs are free. At 10 "t" (TE, 8 GPUs, 100 s)
    # and "b" (BE, 4 GPUs, 10 s) arrive together; t comes first in the priority queue, so it is offered while the
    # 4 free GPUs are still free, and its reservation keeps them from b.
    # t: x preempted at 10, released at 30: t [30, 130). At 130 x (990 s left) and b both start (4 + 4 GPUs).
    jobs = [be("x", 0, 1000, 4, grace=20), te("t", 10, 100, 8), be("b", 10, 10, 4)]
    v, policy, _ = run(one_node, jobs, {"t": ([0], ["x"])})
    assert [(s.job_id, s.now, s.avail[0, 0]) for s in policy.seen] == [("t", 10.0, 4.0)]
    assert v.segments("t") == [(0, 30.0, 130.0, "completed")]
    assert v.segments("b") == [(0, 130.0, 140.0, "completed")]
    assert v.segments("x")[1] == (0, 130.0, 1120.0, "completed")


def test_reserved_te_job_starts_before_its_victim_restarts(run, one_node):
    # One 8-GPU node, bj (BE, 8 GPUs, grace 20) preempted at 100 by tj (TE, 8 GPUs, 50 s). At 120 bj is released
    # and re-queued in the same instant tj becomes startable: the reservation wins. tj [120, 170); bj resumes
    # its 900 s at 170 and ends at 1070.
    jobs = [be("bj", 0, 1000, 8, grace=20), te("tj", 100, 50, 8)]
    v, _, _ = run(one_node, jobs, {"tj": ([0], ["bj"])}, queue="fifo")
    assert v.segments("tj") == [(0, 120.0, 170.0, "completed")]
    assert v.segments("bj")[1] == (0, 170.0, 1070.0, "completed")


def test_reservation_is_not_delayed_by_a_later_reservation_on_the_same_node(run):
    # Regression test: at commit 7840322 Simulator._start_ready_reservations started a reserved job only when
    # avail = free - held >= 0 on its nodes, i.e. when *every* reservation there could start, so A waited for
    # B's victim and both ran [106, 156).
    # One 12-GPU node: b1 (4 GPUs, grace 10) and b2 (8 GPUs, grace 100) run from 0.
    # At 5, A (TE, 4 GPUs, 50 s) reserves the node and preempts b1 (release at 5 + 10 = 15).
    # At 6, B (TE, 4 GPUs, 50 s) reserves the node and preempts b2 (release at 6 + 100 = 106); legal because
    # after its victims leave the node has 12 - 4 (A) = 8 >= 4 for it.
    # At 15 b1 is gone: free = 12 - 8 (b2, still in its grace period) = 4 = A's demand, so A has its room and
    # runs [15, 65). At 65 A's 4 GPUs are free again while b2 still holds 8: B has its room and runs [65, 115).
    jobs = [
        be("b1", 0, 1000, 4, grace=10),
        be("b2", 0, 1000, 8, grace=100),
        te("A", 5, 50, 4),
        te("B", 6, 50, 4),
    ]
    v, _, _ = run(cluster(12), jobs, {"A": ([0], ["b1"]), "B": ([0], ["b2"])})
    assert v.segments("A") == [(0, 15.0, 65.0, "completed")]
    assert v.segments("B") == [(0, 65.0, 115.0, "completed")]


def test_later_reservation_with_faster_victims_starts_first(run):
    # One 12-GPU node: b1 (4 GPUs, grace 100) and b2 (8 GPUs, grace 10) run from 0.
    # At 5, A (TE, 4 GPUs) reserves the node and preempts b1 (release at 105).
    # At 6, B (TE, 4 GPUs) reserves it and preempts b2 (release at 16); legal: once b2 leaves the node has
    # 12 - 4 (b1) - 4 (A) = 4 >= 4.
    # At 16 b2 is gone: free = 12 - 4 (b1, still in grace) = 8 >= B's 4: B runs [16, 66). A starts no later than
    # its own victim's release at 105.
    jobs = [
        be("b1", 0, 1000, 4, grace=100),
        be("b2", 0, 1000, 8, grace=10),
        te("A", 5, 50, 4),
        te("B", 6, 50, 4),
    ]
    v, _, _ = run(cluster(12), jobs, {"A": ([0], ["b1"]), "B": ([0], ["b2"])})
    assert v.segments("B") == [(0, 16.0, 66.0, "completed")]
    assert v["A"].first_start <= 105.0


def test_victims_resources_go_to_the_te_job_they_were_preempted_for(run):
    # One 12-GPU node: b1 (BE, 4 GPUs, grace 100), b2 (BE, 4 GPUs, grace 10) and x (TE, 4 GPUs, 1000 s; not a
    # candidate) fill it. At 5, A (TE, 4 GPUs, 50 s) preempts b1 (release at 105); at 6, B (TE, 4 GPUs, 50 s)
    # preempts b2 (release at 16). What b2 releases is B's, even though A's reservation is older: B runs
    # [16, 66). When B ends, free = 12 - 4 (x) - 4 (b1, still in grace) = 4 = A's demand: A runs [66, 116),
    # before b1's release at 105.
    jobs = [
        te("x", 0, 1000, 4),
        be("b1", 0, 1000, 4, grace=100),
        be("b2", 0, 1000, 4, grace=10),
        te("A", 5, 50, 4),
        te("B", 6, 50, 4),
    ]
    v, _, _ = run(cluster(12), jobs, {"A": ([0], ["b1"]), "B": ([0], ["b2"])})
    assert v.segments("B") == [(0, 16.0, 66.0, "completed")]
    assert v.segments("A") == [(0, 66.0, 116.0, "completed")]


def test_reserved_job_starts_early_if_room_appears_before_its_victims_leave(run, one_node):
    # One 8-GPU node: x (TE, 4 GPUs, 120 s; not preemptible) and v (BE, 4 GPUs, 1000 s, grace 50) run from 0.
    # At 100 A (TE, 4 GPUs, 100 s) reserves the node and preempts v (release at 150). x completes at 120 and
    # frees 4 GPUs: A's node has room, so A runs [120, 220) without waiting for v's grace period.
    # v (900 s left) is released at 150 and finds 8 - 4 = 4 free GPUs: [150, 1050).
    jobs = [te("x", 0, 120, 4), be("v", 0, 1000, 4, grace=50), te("A", 100, 100, 4)]
    v, _, _ = run(one_node, jobs, {"A": ([0], ["v"])})
    assert v.segments("A") == [(0, 120.0, 220.0, "completed")]
    assert v.segments("v") == [(0, 0.0, 100.0, "preempted"), (0, 150.0, 1050.0, "completed")]


# ----------------------------------------------------------------------------------------------------------
# Offers: who is asked, and when again
# ----------------------------------------------------------------------------------------------------------


def test_only_the_oldest_te_job_of_a_shape_is_offered(run, one_node):
    # One 8-GPU node. "b" (BE, 8 GPUs, 100 s) runs from 0; t1, t2, t3 (TE, 8 GPUs, 10 s) arrive at 1. Every offer
    # is declined. At 1 only t1 is asked: t2 and t3 have its shape and would get the same answer.
    # At 100 b completes (a release where the shape fits): t1 starts, t2 is asked; at 110 t1 completes: t2
    # starts, t3 is asked; at 120 t3 starts. Three requests (each TE job once), not six.
    jobs = [be("b", 0, 100, 8), te("t1", 1, 10, 8), te("t2", 1, 10, 8), te("t3", 1, 10, 8)]
    v, policy, sim = run(one_node, jobs)
    assert [(s.job_id, s.now) for s in policy.seen] == [("t1", 1.0), ("t2", 100.0), ("t3", 110.0)]
    assert [v[j].first_start for j in ("t1", "t2", "t3")] == [100.0, 110.0, 120.0]
    assert v.result.n_requests == sim.n_requests == 3


def test_a_release_where_the_te_job_cannot_fit_does_not_offer_it_again(run, two_nodes):
    # Two 8-GPU nodes. y (BE, 8 GPUs, 1000 s) at 0 takes n0; x (TE, 6 GPUs, 50 s) at 0.5 takes n1; v (BE, 2 GPUs,
    # 5 s) at 0.6 fills n1. "t" (TE, 8 GPUs, 100 s) arrives at 1 and is declined (n0 could be freed by
    # preempting y). At 5.6 v completes: n1 then has 2 free GPUs and no candidate, 6 short of t's 8, so nothing
    # that could change the answer has changed and t is not asked. At 50.5 x completes and t starts on n1.
    jobs = [be("y", 0, 1000, 8), te("x", 0.5, 50, 6), be("v", 0.6, 5, 2), te("t", 1, 100, 8)]
    v, policy, _ = run(two_nodes, jobs)
    assert [(s.job_id, s.now) for s in policy.seen] == [("t", 1.0)]
    assert v.segments("t") == [(1, 50.5, 150.5, "completed")]


def test_a_release_where_the_te_job_could_fit_after_preemption_offers_it_again(run, two_nodes):
    # As above, but v is a 4-GPU TE job and x a 4-GPU BE job (x at 0.5, v at 0.6, both on n1). At 1 t is declined
    # (n0 feasible through y). At 5.6 v completes: n1 has 4 free GPUs plus the candidate x (4), enough for t
    # after preempting x, so t is asked again at 5.6 (and declined). It starts at 50.5 when x completes.
    jobs = [be("y", 0, 1000, 8), be("x", 0.5, 50, 4), te("v", 0.6, 5, 4), te("t", 1, 100, 8)]
    v, policy, _ = run(two_nodes, jobs)
    assert [(s.job_id, s.now) for s in policy.seen] == [("t", 1.0), ("t", 5.6)]
    assert v.segments("t") == [(1, 50.5, 150.5, "completed")]


def test_a_new_candidate_where_the_te_job_could_fit_offers_it_again_at_the_next_pass(run, two_nodes):
    # Two 8-GPU nodes. y (BE, 8 GPUs, 1000 s) at 0 takes n0; w (BE, 4 GPUs, 1000 s) at 0.5 takes n1. "t" (TE,
    # 8 GPUs, 100 s) at 1 is declined. At 2 "z" (BE, 4 GPUs, 1000 s) starts on n1's free half: a new candidate on
    # a node where t could fit after preemptions, so t is owed an offer; the pass that started z has already
    # passed t, so t is asked at the next pass, when "u" (BE, 8 GPUs) arrives at 5. At 1000 y and w complete
    # and t starts on n0.
    jobs = [
        be("y", 0, 1000, 8),
        be("w", 0.5, 1000, 4),
        te("t", 1, 100, 8),
        be("z", 2, 1000, 4),
        be("u", 5, 10, 8),
    ]
    v, policy, _ = run(two_nodes, jobs)
    assert [(s.job_id, s.now) for s in policy.seen] == [("t", 1.0), ("t", 5.0)]
    assert v.segments("t") == [(0, 1000.0, 1100.0, "completed")]


# ----------------------------------------------------------------------------------------------------------
# The cap P (max_preemptions)
# ----------------------------------------------------------------------------------------------------------

# One 8-GPU node. bj (BE, 8 GPUs, 1000 s, grace 0). t1 (TE, 4 GPUs, 100 s) at 100, t2 (TE, 8 GPUs, 100 s) at
# 300. Both TE requests ask for bj.
CAP_JOBS = [be("bj", 0, 1000, 8), te("t1", 100, 100, 4), te("t2", 300, 100, 8)]
CAP_SCRIPT = {"t1": ([0], ["bj"]), "t2": ([0], ["bj"])}


def test_cap_one_job_preempted_once_is_no_longer_a_candidate(run, one_node):
    v, policy, _ = run(one_node, CAP_JOBS, {"t1": ([0], ["bj"])}, max_preemptions=1)
    # t1: bj preempted at 100 (900 s left), t1 [100, 200), bj restarts at 200 -> 1100.
    # t2 at 300: bj has 1 preemption = P, so the request lists no candidates and t2 waits: [1100, 1200).
    assert [(s.job_id, s.now, s.candidates) for s in policy.seen] == [
        ("t1", 100.0, {0: ["bj"]}),
        ("t2", 300.0, {}),
    ]
    assert v["bj"].preemptions == 1
    assert v["bj"].completion == 1100.0
    assert v["t2"].first_start == 1100.0


def test_cap_zero_preempts_nothing(run, one_node):
    v, policy, sim = run(one_node, CAP_JOBS, {}, max_preemptions=0)
    # No candidates ever. bj runs [0, 1000). At 1000 t1 (4 GPUs, submitted first) starts [1000, 1100); t2 needs 8
    # and waits for t1: [1100, 1200).
    assert all(s.candidates == {} for s in policy.seen)
    assert len(policy.seen) >= 2
    assert sim.n_preemptions == 0
    assert v.segments("bj") == [(0, 0.0, 1000.0, "completed")]
    assert v["t1"].first_start == 1000.0
    assert v["t2"].first_start == 1100.0


def test_cap_two_allows_a_second_preemption(run, one_node):
    v, _, _ = run(one_node, CAP_JOBS, CAP_SCRIPT, max_preemptions=2)
    # bj: [0, 100) preempted (900 left); t1 [100, 200); bj [200, 300) preempted (800 left); t2 [300, 400);
    # bj [400, 1200).
    assert v.segments("bj") == [
        (0, 0.0, 100.0, "preempted"),
        (0, 200.0, 300.0, "preempted"),
        (0, 400.0, 1200.0, "completed"),
    ]
    assert v["bj"].preemptions == 2


def test_cap_zero_rejects_a_plan_naming_a_victim(one_node):
    from schedgym.errors import IllegalDecisionError

    sim = Simulator(one_node, CAP_JOBS, SimConfig(max_preemptions=0))
    req = sim.advance()
    assert req.job.job_id == "t1" and req.candidates == {}
    with pytest.raises(IllegalDecisionError, match="not a preemption candidate"):
        sim.resolve(PreemptionPlan(nodes=(0,), victims=(0,)))


def test_te_jobs_are_never_candidates(run, one_node):
    # A running TE job is not preemptible: "tbig" (TE, 8 GPUs) runs from 0; "t2" (TE) at 10 sees no candidates.
    jobs = [te("tbig", 0, 100, 8), te("t2", 10, 10, 8)]
    v, policy, _ = run(one_node, jobs)
    assert [(s.job_id, s.candidates) for s in policy.seen] == [("t2", {})]
    assert v["t2"].first_start == 100.0


# ----------------------------------------------------------------------------------------------------------
# Gang jobs
# ----------------------------------------------------------------------------------------------------------


def test_gang_is_placed_on_distinct_best_fit_nodes(run):
    # Three 8-GPU nodes. "a" (2 GPUs, 1000 s) -> n0. "g" (BE, 8 GPUs over 2 nodes = 4 per node, 100 s) at 1:
    # leftover GPUs would be n0: 6 - 4 = 2, n1: 4, n2: 4 -> best fit n0 and n1 (tie n1/n2 by node order).
    jobs = [be("a", 0, 1000, 2), be("g", 1, 100, 8, gang_size=2)]
    v, _, _ = run(cluster(8, 8, 8), jobs)
    assert v.segments("g") == [(0, 1.0, 101.0, "completed"), (1, 1.0, 101.0, "completed")]


def test_gang_members_start_together(run, two_nodes):
    # "blk" (8 GPUs, 100 s) takes n0 at 0. "g" (16 GPUs over 2 nodes) fits on n1 alone but needs both:
    # it starts when blk ends, at 100, on both nodes, and ends at 100 + 50 = 150.
    jobs = [be("blk", 0, 100, 8), be("g", 0, 50, 16, gang_size=2)]
    v, _, _ = run(two_nodes, jobs)
    assert v.segments("g") == [(0, 100.0, 150.0, "completed"), (1, 100.0, 150.0, "completed")]


def test_gang_member_demand_is_split_evenly():
    spec = JobSpec("g", 0.0, 10.0, gpus=6.0, cpus=12.0, mem_gb=30.0, gang_size=3)
    assert spec.member_demand == (2.0, 4.0, 10.0)


def test_preempting_a_gang_frees_both_nodes(run, two_nodes):
    # "g" (BE, 16 GPUs over 2 nodes, 1000 s, grace 20) runs on n0 and n1 from 0.
    # "tj" (TE, 8 GPUs, 100 s) at 100 takes n0 by preempting g: both of g's segments end at 100, and both nodes
    # are released at 100 + 20 = 120. tj runs [120, 220) on n0.
    # "other" (BE, 8 GPUs, 50 s) arrives at 110; at 120 n1 is free and unreserved: it runs [120, 170) on n1.
    # g (900 s left) needs both nodes: it restarts when tj ends, [220, 1120) on n0 and n1.
    jobs = [be("g", 0, 1000, 16, grace=20, gang_size=2), te("tj", 100, 100, 8), be("other", 110, 50, 8)]
    v, _, _ = run(two_nodes, jobs, {"tj": ([0], ["g"])})
    assert v.segments("g") == [
        (0, 0.0, 100.0, "preempted"),
        (1, 0.0, 100.0, "preempted"),
        (0, 220.0, 1120.0, "completed"),
        (1, 220.0, 1120.0, "completed"),
    ]
    assert v.segments("other") == [(1, 120.0, 170.0, "completed")]
    assert v.segments("tj") == [(0, 120.0, 220.0, "completed")]
    assert v["g"].preemptions == 1  # one preemption, not one per node
    assert v["g"].grace_time == 20.0


def test_gang_te_job_reserves_all_its_nodes(run, two_nodes):
    # "b0" (BE, 8 GPUs, grace 10) on n0, "b1" (BE, 8 GPUs, grace 30) on n1. "tg" (TE, 16 GPUs over 2 nodes, 100 s)
    # at 100 preempts both; it starts when the slower victim is gone: max(110, 130) = 130, on both nodes.
    jobs = [be("b0", 0, 1000, 8, grace=10), be("b1", 0, 1000, 8, grace=30), te("tg", 100, 100, 16, gang_size=2)]
    v, _, _ = run(two_nodes, jobs, {"tg": ([0, 1], ["b0", "b1"])})
    assert v.segments("tg") == [(0, 130.0, 230.0, "completed"), (1, 130.0, 230.0, "completed")]


# ----------------------------------------------------------------------------------------------------------
# Restart overhead
# ----------------------------------------------------------------------------------------------------------


def test_restart_overhead_shifts_completion(run, one_node):
    v, _, _ = run(one_node, GRACE_JOBS, GRACE_SCRIPT, restart_overhead=50.0)
    # As in the grace-period tests bj restarts at 230 with 900 s left, plus 50 s overhead: ends 230 + 50 + 900
    # = 1180. The first run (no preemption before it) pays no overhead: it made 100 s of progress.
    assert v.segments("bj") == [(0, 0.0, 100.0, "preempted"), (0, 230.0, 1180.0, "completed")]
    assert v["bj"].overhead_time == 50.0
    # run_time = 100 + 950 = 1050 = duration + overhead; wait = 1180 - 0 - 1050 = 130.
    assert v["bj"].run_time == pytest.approx(1050.0)
    assert v["bj"].wait == pytest.approx(130.0)


def test_no_overhead_without_preemption(run, one_node):
    v, _, _ = run(one_node, [be("a", 0, 100, 8), be("b", 0, 100, 8)], restart_overhead=50.0)
    # Waiting in the queue is not a restart: b runs [100, 200), no overhead.
    assert v.segments("b") == [(0, 100.0, 200.0, "completed")]
    assert v["b"].overhead_time == 0.0


def test_preemption_during_restart_overhead_loses_no_work(run, one_node):
    # bj (BE, 8 GPUs, 1000 s, grace 0), overhead 50, P = 2. t1 (TE, 8 GPUs, 100 s) at 100: bj [0, 100) preempted,
    # 900 left; t1 [100, 200). bj restarts at 200, paying overhead until 250; t2 (TE, 8 GPUs, 100 s) at 220
    # preempts it inside the overhead: progress max(0, 220 - 200 - 50) = 0, still 900 left; t2 [220, 320).
    # bj restarts at 320: ends 320 + 50 + 900 = 1270.
    jobs = [be("bj", 0, 1000, 8), te("t1", 100, 100, 8), te("t2", 220, 100, 8)]
    v, _, _ = run(one_node, jobs, {"t1": ([0], ["bj"]), "t2": ([0], ["bj"])}, restart_overhead=50.0, max_preemptions=2)
    assert v.segments("bj") == [
        (0, 0.0, 100.0, "preempted"),
        (0, 200.0, 220.0, "preempted"),
        (0, 320.0, 1270.0, "completed"),
    ]
    # overhead paid: 20 (cut short) + 50 = 70; run_time = 100 + 20 + 950 = 1070 = 1000 + 70.
    assert v["bj"].overhead_time == pytest.approx(70.0)
    assert v["bj"].run_time == pytest.approx(1070.0)


def test_a_jobs_own_restart_overhead_replaces_the_simulators(run, one_node):
    # As test_restart_overhead_shifts_completion, but bj gives its own overhead of 20 s, which wins over the
    # simulator's 50: bj restarts at 230 and ends at 230 + 20 + 900 = 1150.
    jobs = [be("bj", 0, 1000, 8, grace=30, restart_overhead=20.0), te("tj", 100, 100, 4)]
    v, _, _ = run(one_node, jobs, GRACE_SCRIPT, restart_overhead=50.0)
    assert v.segments("bj") == [(0, 0.0, 100.0, "preempted"), (0, 230.0, 1150.0, "completed")]
    assert v["bj"].overhead_time == 20.0
    # run_time = 100 + 920 = 1020 = duration + overhead.
    assert v["bj"].run_time == pytest.approx(1020.0)


def test_a_jobs_restart_overhead_of_zero_is_not_the_default(run, one_node):
    # restart_overhead=0.0 is a value (no overhead), not "none given": the simulator's 50 s do not apply.
    # bj restarts at 230 with 900 s left and ends at 1130, as with no overhead at all.
    jobs = [be("bj", 0, 1000, 8, grace=30, restart_overhead=0.0), te("tj", 100, 100, 4)]
    v, _, _ = run(one_node, jobs, GRACE_SCRIPT, restart_overhead=50.0)
    assert v.segments("bj")[1] == (0, 230.0, 1130.0, "completed")
    assert v["bj"].overhead_time == 0.0


def test_restart_overhead_per_job_and_default_side_by_side(run, two_nodes):
    # Two 8-GPU nodes. best fit at 0: "big" (BE, 8 GPUs, 1000 s, own overhead 60) -> n0; "small" (BE, 8 GPUs,
    # 1000 s, no overhead of its own, so the simulator's 5) -> n1. At 100 "t0" (TE, 8 GPUs, 100 s) preempts big
    # on n0 and "t1" (TE, 8 GPUs, 100 s) preempts small on n1 (grace 0): both TE jobs run [100, 200). Both BE
    # jobs have 900 s left and restart at 200 (big on n0, small on n1, each its own node by best fit, ties to the
    # lower index, queue order by submit time then trace order): big ends 200 + 60 + 900 = 1160, small 200 + 5
    # + 900 = 1105.
    jobs = [
        be("big", 0, 1000, 8, restart_overhead=60.0),
        be("small", 0, 1000, 8),
        te("t0", 100, 100, 8),
        te("t1", 100, 100, 8),
    ]
    script = {"t0": ([0], ["big"]), "t1": ([1], ["small"])}
    v, _, _ = run(two_nodes, jobs, script, restart_overhead=5.0)
    assert v.segments("big")[1] == (0, 200.0, 1160.0, "completed")
    assert v.segments("small")[1] == (1, 200.0, 1105.0, "completed")
    assert (v["big"].overhead_time, v["small"].overhead_time) == (60.0, 5.0)


# ----------------------------------------------------------------------------------------------------------
# Queue discipline, backfill, placement
# ----------------------------------------------------------------------------------------------------------

# One 8-GPU node. "blk" (BE, 8 GPUs, 100 s) runs from 0; "b" (BE, 8 GPUs, 100 s) at 10; "t" (TE, 8 GPUs, 100 s)
# at 20. Nobody is preempted (the scripted policy declines).
ORDER_JOBS = [be("blk", 0, 100, 8), be("b", 10, 100, 8), te("t", 20, 100, 8)]


def test_fifo_orders_by_submit_time(run, one_node):
    v, _, _ = run(one_node, ORDER_JOBS, queue="fifo")
    # b (submitted 10) before t (20): b [100, 200), t [200, 300).
    assert (v["b"].first_start, v["t"].first_start) == (100.0, 200.0)


def test_priority_puts_te_before_be(run, one_node):
    v, _, _ = run(one_node, ORDER_JOBS, queue="priority")
    # t (TE) before b (BE) despite b's earlier submission: t [100, 200), b [200, 300).
    assert (v["t"].first_start, v["b"].first_start) == (100.0, 200.0)


# One 8-GPU node. "r" (4 GPUs, 100 s) from 0; "big" (8 GPUs, 100 s) at 1; "small" (4 GPUs, 50 s) at 2.
BACKFILL_JOBS = [be("r", 0, 100, 4), be("big", 1, 100, 8), be("small", 2, 50, 4)]


def test_backfill_lets_a_later_job_start(run, one_node):
    v, _, _ = run(one_node, BACKFILL_JOBS, backfill=True)
    # big does not fit (4 free); small does: [2, 52). big starts when r ends: [100, 200).
    assert v.segments("small") == [(0, 2.0, 52.0, "completed")]
    assert v["big"].first_start == 100.0


def test_no_backfill_blocks_at_the_head(run, one_node):
    v, _, _ = run(one_node, BACKFILL_JOBS, backfill=False)
    # small waits behind big: big [100, 200), small [200, 250).
    assert v["big"].first_start == 100.0
    assert v.segments("small") == [(0, 200.0, 250.0, "completed")]


def test_no_backfill_blocks_be_behind_a_declined_te_job(run, one_node):
    # priority, no backfill. "r" (BE, 4 GPUs, 100 s) from 0; "t" (TE, 8 GPUs, 10 s) at 1 cannot fit and the
    # policy declines; "s" (BE, 4 GPUs, 10 s) at 2 could fit the 4 free GPUs but must wait behind t:
    # t [100, 110), s [110, 120).
    jobs = [be("r", 0, 100, 4), te("t", 1, 10, 8), be("s", 2, 10, 4)]
    v, _, _ = run(one_node, jobs, backfill=False)
    assert v["t"].first_start == 100.0
    assert v["s"].first_start == 110.0


# Heterogeneous nodes: n0 has 8 GPUs, n1 has 4.
def test_best_fit_picks_least_leftover_gpus(run):
    # A 4-GPU job leaves 8 - 4 = 4 on n0 and 4 - 4 = 0 on n1: best fit takes n1.
    v, _, _ = run(cluster(8, 4), [be("j", 0, 10, 4)], placement="best-fit")
    assert v.segments("j")[0][0] == 1


def test_first_fit_picks_lowest_index(run):
    v, _, _ = run(cluster(8, 4), [be("j", 0, 10, 4)], placement="first-fit")
    assert v.segments("j")[0][0] == 0


def test_best_fit_breaks_gpu_ties_by_cpus_then_memory(run):
    from schedgym.sim import ClusterSpec, NodeSpec

    nodes = ClusterSpec(
        (
            NodeSpec("a", 8, 64, 256),  # leftover (4, 48, 192)
            NodeSpec("b", 8, 32, 512),  # leftover (4, 16, 448): fewer CPUs left than a and c
            NodeSpec("c", 8, 32, 256),  # leftover (4, 16, 192): ties b on GPUs and CPUs, less memory -> wins
        )
    )
    v, _, _ = run(nodes, [be("j", 0, 10, 4, cpus=16, mem_gb=64)])
    assert v.segments("j")[0][0] == 2


def test_best_fit_ties_go_to_lower_node_index(run):
    # Three identical nodes: all leftovers equal, n0 wins; the second job then prefers n0 again (leftover 0).
    v, _, _ = run(cluster(8, 8, 8), [be("j", 0, 10, 4), be("k", 0, 10, 4)])
    assert v.segments("j")[0][0] == 0
    assert v.segments("k")[0][0] == 0


def test_best_fit_gang_picks_the_tightest_nodes(run):
    # Nodes with 8, 4, 8, 4 GPUs; a gang of 2 x 4 GPUs leaves 4, 0, 4, 0: best fit n1 and n3; first fit n0, n1.
    jobs = [be("g", 0, 10, 8, gang_size=2)]
    v, _, _ = run(cluster(8, 4, 8, 4), jobs)
    assert sorted(s[0] for s in v.segments("g")) == [1, 3]
    v, _, _ = run(cluster(8, 4, 8, 4), jobs, placement="first-fit")
    assert sorted(s[0] for s in v.segments("g")) == [0, 1]


def test_fractional_gpus_pack_exactly(run):
    # One 1-GPU node and three 0.1 + 0.2 + 0.7 GPU jobs: 0.1 + 0.2 + 0.7 = 1.0 up to rounding, so all three must
    # run at once from 0 (the simulator compares with a tolerance).
    jobs = [be("a", 0, 10, 0.1), be("b", 0, 10, 0.2), be("c", 0, 10, 0.7)]
    v, _, _ = run(cluster(1), jobs)
    assert [v[j].first_start for j in "abc"] == [0.0, 0.0, 0.0]


# ----------------------------------------------------------------------------------------------------------
# Equal-time events
# ----------------------------------------------------------------------------------------------------------


def test_completion_frees_resources_for_an_arrival_at_the_same_instant(run, one_node):
    # a (8 GPUs, 100 s) ends at 100; b (8 GPUs) arrives at 100 and starts right away.
    v, _, _ = run(one_node, [be("a", 0, 100, 8), be("b", 100, 10, 8)])
    assert v.segments("b") == [(0, 100.0, 110.0, "completed")]


def test_release_frees_resources_for_an_arrival_at_the_same_instant(run, two_nodes):
    # Two 8-GPU nodes. "x" (8 GPUs, 1000 s) on n1 the whole time. bj (BE, 8 GPUs, grace 30) on n0 is preempted at
    # 100 by tj (TE, 4 GPUs, 10 s) reserving n0. At 130 bj is released: tj starts on n0 and 8 - 4 = 4 GPUs are
    # left. "y" (BE, 4 GPUs, 5 s) arrives at 130 and takes them at once: [130, 135) on n0. bj (8 GPUs) cannot
    # fit until tj ends at 140: [140, 1040).
    jobs = [be("bj", 0, 1000, 8, grace=30), be("x", 0, 1000, 8), te("tj", 100, 10, 4), be("y", 130, 5, 4)]
    v, _, _ = run(two_nodes, jobs, {"tj": ([0], ["bj"])})
    assert v.segments("tj") == [(0, 130.0, 140.0, "completed")]
    assert v.segments("y") == [(0, 130.0, 135.0, "completed")]
    assert v.segments("bj")[1] == (0, 140.0, 1040.0, "completed")


def test_same_submit_time_keeps_trace_order(run, one_node):
    # Three 8-GPU jobs all at 0: they run in trace order.
    v, _, _ = run(one_node, [be("a", 0, 10, 8), be("b", 0, 10, 8), be("c", 0, 10, 8)], queue="fifo")
    assert [v[j].first_start for j in "abc"] == [0.0, 10.0, 20.0]


# ----------------------------------------------------------------------------------------------------------
# Metrics
# ----------------------------------------------------------------------------------------------------------


def test_bounded_slowdown_uses_tau_10(run, one_node):
    # "blk" (8 GPUs, 8 s) then "short" (8 GPUs, 2 s, submitted at 0): short runs [8, 10).
    v, _, _ = run(one_node, [be("blk", 0, 8, 8), be("short", 0, 2, 8)])
    # slowdown = (10 - 0) / 2 = 5; bounded = max(1, 10 / max(2, 10)) = 1.
    assert v["short"].slowdown == pytest.approx(5.0)
    assert v["short"].bounded_slowdown == pytest.approx(1.0)
    # blk: slowdown 8 / 8 = 1; bounded = max(1, 8 / 10) = 1.
    assert v["blk"].bounded_slowdown == pytest.approx(1.0)


def test_bounded_slowdown_of_a_long_wait(run, one_node):
    # "blk" (8 GPUs, 100 s); "s" (8 GPUs, 4 s) at 0 runs [100, 104): bounded = 104 / max(4, 10) = 10.4.
    v, _, _ = run(one_node, [be("blk", 0, 100, 8), be("s", 0, 4, 8)])
    assert v["s"].bounded_slowdown == pytest.approx(10.4)
    assert v["s"].slowdown == pytest.approx(26.0)  # 104 / 4


def test_gpu_utilization_counts_run_segments_over_makespan(run, two_nodes):
    # Two 8-GPU nodes = 16 GPUs. "a" (8 GPUs, 100 s) at 0, "b" (4 GPUs, 50 s) at 50.
    # GPU-seconds = 8 * 100 + 4 * 50 = 1000; makespan = 100 - 0 = 100; utilisation = 1000 / (16 * 100) = 0.625.
    v, _, _ = run(two_nodes, [be("a", 0, 100, 8), be("b", 50, 50, 4)])
    assert v.result.makespan == 100.0
    assert v.result.gpu_utilization == pytest.approx(0.625)


def test_gpu_utilization_excludes_grace_periods(run, one_node):
    # GRACE_JOBS: bj runs 100 + 900 s on 8 GPUs, tj 100 s on 4 GPUs; grace [100, 130) is not useful work.
    # GPU-seconds = 8 * 1000 + 4 * 100 = 8400; makespan = 1130 - 0; utilisation = 8400 / (8 * 1130).
    v, _, _ = run(one_node, GRACE_JOBS, GRACE_SCRIPT)
    assert v.result.gpu_utilization == pytest.approx(8400 / (8 * 1130))


def test_gpu_utilization_counts_restart_overhead_as_run_time(run, one_node):
    # GRACE_JOBS with a 50 s restart overhead: bj runs 100 + 950 s (run time includes the overhead), tj 100 s;
    # last completion 1180. utilisation = (8 * 1050 + 4 * 100) / (8 * 1180).
    v, _, _ = run(one_node, GRACE_JOBS, GRACE_SCRIPT, restart_overhead=50.0)
    assert v.result.gpu_utilization == pytest.approx((8 * 1050 + 4 * 100) / (8 * 1180))


def test_class_stats_split_te_and_be(run, one_node):
    # GRACE_JOBS: TE slowdown 1.3, wait 30; BE slowdown 1.13, wait 130, one preemption, grace 30.
    v, _, _ = run(one_node, GRACE_JOBS, GRACE_SCRIPT)
    from schedgym.sim import JobClass

    te_stats = v.result.class_stats(JobClass.TE)
    be_stats = v.result.class_stats(JobClass.BE)
    assert (te_stats.n_jobs, te_stats.slowdown_p50, te_stats.wait_mean) == (1, pytest.approx(1.3), pytest.approx(30))
    assert (be_stats.n_jobs, be_stats.slowdown_mean, be_stats.wait_mean) == (1, pytest.approx(1.13), pytest.approx(130))
    assert (be_stats.preemptions, be_stats.grace_time) == (1, 30.0)
    assert te_stats.preemptions == 0


def test_class_stats_percentiles_interpolate(run):
    # One 8-GPU node; four 8-GPU jobs of 10 s submitted at 0 run back to back: completions 10, 20, 30, 40,
    # slowdowns 1, 2, 3, 4. numpy linear percentiles: p50 = 2.5, p95 = 3 + 0.85 * 1 = 3.85, mean 2.5; wait = 0, 10, 20,
    # 30 -> mean 15.
    jobs = [be(f"j{i}", 0, 10, 8) for i in range(4)]
    v, _, _ = run(cluster(8), jobs)
    from schedgym.sim import JobClass

    s = v.result.class_stats(JobClass.BE)
    assert s.slowdown_p50 == pytest.approx(2.5)
    assert s.slowdown_p95 == pytest.approx(3.85)
    assert s.slowdown_mean == pytest.approx(2.5)
    assert s.wait_mean == pytest.approx(15.0)
    empty = v.result.class_stats(JobClass.TE)
    assert empty.n_jobs == 0 and math.isnan(empty.slowdown_p50)


def test_summary_has_class_entries_and_aggregates(run, one_node):
    v, _, _ = run(one_node, GRACE_JOBS, GRACE_SCRIPT)
    s = v.result.summary()
    assert set(s) >= {"te", "be", "preemptions", "gpu_utilization", "makespan"}
    assert s["preemptions"] == 1
    assert s["makespan"] == 1130.0
    assert s["be"]["slowdown_p99"] == pytest.approx(1.13)


def test_queue_lengths_count_reserved_te_jobs():
    # GRACE_JOBS plus "probe" (TE, 8 GPUs) at 115 and "bq" (BE, 8 GPUs) at 110. At the probe's request: tj is
    # reserved (TE), probe is queued (TE), bq is queued (BE), bj is PREEMPTING (neither): (2, 1).
    jobs = [*GRACE_JOBS, be("bq", 110, 10, 8), te("probe", 115, 10, 8)]
    sim = Simulator(cluster(8), jobs, SimConfig())
    sim.advance()
    sim.resolve(PreemptionPlan(nodes=(0,), victims=(0,)))
    req = sim.advance()
    assert req.job.job_id == "probe"
    assert sim.queue_lengths == (2, 1)
    assert sim.running_on(0) == frozenset({0})  # bj still occupies the node during its grace period
