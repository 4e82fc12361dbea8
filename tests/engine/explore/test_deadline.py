"""One deadline through every phase of an exploration call: each phase stops and returns what it has."""

import math
import subprocess
import sys
import time

import pytest

import relwrite as rw
from relwrite import parse
from relwrite.engine.explore import Exploration, Limits, Runner
from relwrite.engine.explore.api import Form, share_inputs
from relwrite.engine.explore.deadline import Deadline, TimeLimitReached
from relwrite.engine.explore.runner import StopReason
from relwrite.graph.printing import expression_text, pprint

SEED = "log(1 + exp(x)) * exp(log(z))"
WORK = Limits(iterations=3, seconds=math.inf)  # what is found depends on work only


class StopsAt(Deadline):
    """A deadline without time that passes in one phase only: phase stops by work, not by the clock."""

    def __init__(self, phase: str):
        super().__init__(math.inf)
        self.phase = phase

    def check(self, phase: str) -> None:
        if phase == self.phase:
            self.stops.setdefault(phase, StopReason.TIME_LIMIT)
            raise TimeLimitReached(f"{phase}: stopped", "max_seconds")


def explored(phase: str, text: str = SEED) -> Exploration:
    exploration = Exploration([parse(text)], limits=WORK, deadline=StopsAt(phase))
    exploration.run()
    return exploration


@pytest.mark.parametrize("phase", ["extraction", "explanation", "checking"])
def test_a_listing_cut_in_any_phase_ends_with_the_input_and_says_where(phase):
    exploration = explored(phase)
    forms = list(exploration.forms(0, "nodes"))
    assert [(pprint(f.expr), f.cost, f.steps) for f in forms] == [
        ("(log((1.0 + exp(x))) * exp(log(z)))", 8.0, ())  # priced as a DAG
    ]
    assert exploration.report.phases == {phase: StopReason.TIME_LIMIT}
    complete = list(explored("none").forms(0, "nodes"))
    assert len(complete) > 1 and complete[0].steps  # uncut, cheaper forms come first


def test_best_form_cut_returns_the_input_priced_by_the_cost():
    exploration = explored("extraction")
    best = exploration.best(0, "nodes")
    assert best.expr is exploration.exprs[0] and best.cost == 8.0 and not best.steps
    assert exploration.report.phases == {"extraction": StopReason.TIME_LIMIT}
    assert explored("none").best(0, "nodes").cost < 8  # uncut, a cheaper form


@pytest.mark.parametrize("phase", ["explanation", "checking"])
def test_a_proof_cut_before_it_is_explained_and_checked_is_none(phase):
    a = parse("exp(log(x)) * y")
    b = share_inputs(a, parse("x * y"))
    exploration = Exploration([a, b], unsafe=True, limits=WORK, deadline=StopsAt(phase))
    assert exploration.proof() is None
    assert exploration.report.phases == {phase: StopReason.TIME_LIMIT}
    assert Exploration([a, b], unsafe=True, limits=WORK).proof() is not None


def test_the_accuracy_reference_is_built_within_the_deadline():
    """The reference of a long expression takes seconds: a passed deadline interrupts it."""
    deadline = Deadline(0.01)
    exploration = Exploration([chain(lambda v: rw.add(rw.sin(v), v))], limits=WORK, deadline=deadline)
    time.sleep(0.02)
    assert exploration.resolve_cost("accuracy") is None
    assert deadline.stops == {"cost": StopReason.TIME_LIMIT}
    assert exploration.resolve_cost("nodes") is not None  # a cost that takes no time is not refused


def test_the_runner_stops_at_the_time_it_is_given():
    exploration = Exploration([parse(SEED)], limits=WORK)
    report = exploration.runner.run(exploration.roots, until=time.perf_counter())
    assert report.stop_reason == StopReason.TIME_LIMIT and report.iterations == 0
    assert isinstance(exploration.runner, Runner)


def chain(step, n=2_000):
    """About `n` nodes, each level reading the one below twice: 2**(n/2) terms written out as a tree."""
    v = rw.float64("x")
    for _ in range(n // 2):
        v = step(v)
    return v


def test_texts_of_a_shared_graph_are_linear_in_its_size():
    """pprint writes shared subterms at every use; messages and forms of such graphs must not."""
    big = chain(lambda v: rw.sub(rw.exp(v), v))
    with pytest.raises(ValueError, match="terms"):
        pprint(big)
    text = expression_text(big)
    assert text.startswith("sub(exp(*1 -> sub(") and len(text) < 100_000
    assert str(Form(big, 1.0)).startswith("sub(exp(*1 -> ")
    assert Form(big, 1.0).to_dict()["expr"] == text
    assert expression_text(parse(SEED)) == pprint(parse(SEED))  # small graphs read as before


LIMITED_CALLS = '''
import itertools
import time

import relwrite as rw
from relwrite.engine.explore import Limits, best_form, explore, pareto, prove


def chain(step, n=2_000):
    """A chain of about n nodes, each level reading the one below twice (written out: 2**levels terms)."""
    x = rw.float64("x")
    v = x
    for _ in range(n // 2):
        v = step(v)
    return v


exps = chain(lambda v: rw.sub(rw.exp(v), v))
sines = chain(lambda v: rw.add(rw.sin(v), v))
limits = Limits(seconds=1)
calls = {
    "explore": lambda: list(itertools.islice(explore(exps, limits=limits), 100)),
    "best_form": lambda: best_form(exps, limits=limits),
    "best_form accuracy": lambda: best_form(sines, cost="accuracy", limits=limits),
    "prove": lambda: prove(exps, rw.mul(exps, 1.0), limits=limits),
    "pareto": lambda: pareto(sines, limits=limits),
}
for name, call in calls.items():
    started = time.perf_counter()
    result = call()
    print(f"{name}: {time.perf_counter() - started:.2f}", flush=True)
'''


def test_every_public_call_finishes_near_its_time_limit():
    """Limits(seconds=1) bounds the whole call on 2,000-node chains with sharing: explore, best_form
    (nodes and accuracy), prove, pareto took from 8 s to minutes when only the search was bounded.
    A subprocess, so that a regression cannot hang the suite; the bound is a generous guard."""
    done = subprocess.run([sys.executable, "-c", LIMITED_CALLS], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    seconds = dict(line.split(": ") for line in done.stdout.splitlines())
    assert set(seconds) == {"explore", "best_form", "best_form accuracy", "prove", "pareto"}
    for name, elapsed in seconds.items():
        assert float(elapsed) < 15, f"{name} took {elapsed} s with Limits(seconds=1)"
