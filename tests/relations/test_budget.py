"""The one budget on relation runs: steps, the clock that interrupts plain Python, nesting, threads."""

import gc
import itertools
import math
import signal
import sys
import threading
import time
from contextlib import contextmanager

import kanren.core
import pytest
import toolz

import relwrite
from relwrite import FunctionGraph, exp, float64
from relwrite.engine import EquilibriumRewriter, KanrenRelationSub
from relwrite.relations.budget import BudgetExceeded, charge, metered, relation_budget

pytestmark = pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs setitimer")


class OuterAlarm(Exception):
    pass


def spin():
    while True:
        pass


@pytest.fixture
def no_timer_left():
    """The test leaves SIGALRM's handler and timer as it found them."""
    handler = signal.getsignal(signal.SIGALRM)
    yield
    assert signal.getsignal(signal.SIGALRM) is handler
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_importing_relwrite_leaves_kanren_unpatched():
    assert relwrite.__name__ == "relwrite"
    assert kanren.core.interleave is toolz.interleave


def test_the_clock_interrupts_a_plain_python_loop_naming_the_run(no_timer_left):
    with (
        pytest.raises(
            BudgetExceeded, match=r"^rule spin at x: no answer within max_seconds=0.05 \(0 steps\)$"
        ),
        relation_budget(lambda: "rule spin at x", max_seconds=0.05) as meter,
    ):
        spin()
    assert meter.error.budget == "max_seconds" and meter.error.meter is meter


def test_a_block_that_swallows_the_interrupt_is_interrupted_again(no_timer_left):
    swallowed = 0
    with pytest.raises(BudgetExceeded), relation_budget("swallower", max_seconds=0.05):
        while swallowed < 3:
            try:
                spin()
            except BudgetExceeded:
                swallowed += 1
        spin()
    assert swallowed == 3


def test_a_budget_entered_in_a_generator_based_context_manager_interrupts_the_block(no_timer_left):
    """Entered inside a contextmanager's generator, the budget's frame is suspended while the block runs:
    the block is the caller's."""

    @contextmanager
    def limited():
        with relation_budget("wrapped", max_seconds=0.05):
            yield

    guard = time.monotonic() + 30  # so that a failure cannot hang the suite
    with pytest.raises(BudgetExceeded, match=r"^wrapped: "), limited():
        while time.monotonic() < guard:
            pass


def test_an_interrupt_landing_in_a_gc_callback_is_raised_after_it(no_timer_left, monkeypatch):
    """Python prints and drops an error raised in a garbage collector callback (hypothesis installs one):
    the interrupt is put off until the callback has returned."""
    dropped = []
    monkeypatch.setattr(sys, "unraisablehook", dropped.append)

    def slow_callback(phase, info):
        if phase == "start":
            until = time.monotonic() + 0.2  # the budget's alarm falls due in here
            while time.monotonic() < until:
                pass

    gc.callbacks.append(slow_callback)
    try:
        with pytest.raises(BudgetExceeded), relation_budget("collecting", max_seconds=0.05):
            gc.collect()
            spin()
    finally:
        gc.callbacks.remove(slow_callback)
    assert dropped == []


def test_an_interrupt_landing_in_an_import_is_raised_after_it(no_timer_left, tmp_path, monkeypatch):
    """A module cut off mid-import stays half made (its package loses it, a re-import runs the package
    again beside the submodules that stayed: a form check loading hypothesis under a deadline broke
    hypothesis for the rest of the process): the interrupt is put off until the import is done."""
    package = tmp_path / "slow_package_under_budget"
    package.mkdir()
    (package / "__init__.py").write_text("from . import inner\nLOADED = inner.DONE\n")
    (package / "inner.py").write_text(
        "import time\nuntil = time.monotonic() + 0.2\n"
        "while time.monotonic() < until:\n    pass\nDONE = True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(BudgetExceeded), relation_budget("importing", max_seconds=0.05):
        import slow_package_under_budget

        spin()
    assert slow_package_under_budget.LOADED and slow_package_under_budget.inner.DONE
    assert sys.modules["slow_package_under_budget"] is slow_package_under_budget


def test_steps_are_what_is_pulled_and_a_spent_budget_stays_spent(no_timer_left):
    with relation_budget("counted", max_steps=5, max_seconds=None) as meter:
        assert list(metered(range(4))) == [0, 1, 2, 3]
        assert meter.steps == 5  # four values and the pull that found the end
        with pytest.raises(BudgetExceeded, match="counted: no answer within max_steps=5 steps"):
            charge()
        with pytest.raises(BudgetExceeded):
            charge()
    charge()  # outside the block nothing is counted


def test_when_nested_budgets_run_out_the_outermost_error_is_raised(no_timer_left):
    with (
        pytest.raises(BudgetExceeded) as caught,
        relation_budget("the call", max_seconds=0.05) as outer,
        relation_budget("a rule", max_seconds=30),
    ):
        spin()
    assert caught.value.meter is outer and str(caught.value).startswith("the call: ")


def test_an_outer_timer_falling_due_inside_a_budget_reaches_its_own_handler():
    def alarm(signum, frame):
        raise OuterAlarm

    previous = signal.signal(signal.SIGALRM, alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(OuterAlarm), relation_budget("a rule", max_seconds=30):
            spin()
        assert signal.getsignal(signal.SIGALRM) is alarm  # given back
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_an_outer_timer_gets_back_what_is_left_of_it():
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        with relation_budget("a rule", max_seconds=5):
            pass
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < left <= 30  # still running, not restarted longer
        assert fired == []
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_off_the_main_thread_the_clock_is_read_as_steps_are_charged(no_timer_left):
    outcome = []

    def run():
        try:
            with relation_budget("in a thread", max_steps=None, max_seconds=0.05):
                while True:
                    charge()
        except BudgetExceeded as exc:
            outcome.append(str(exc))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    assert outcome and outcome[0].startswith("in a thread: no answer within max_seconds=0.05")


def test_an_engine_stops_when_a_budget_around_it_runs_out_and_restores_the_graph(no_timer_left):
    """A rule's own budget running out is that rule's (skipped, reported); a budget around the whole
    call running out during a rule run stops the call, whatever rule was running."""

    def loops(lhs, rhs):
        def goal(state):
            spin()
            yield state

        return goal

    rule = KanrenRelationSub(loops, tracks=[exp], name="loops", max_seconds=30)
    x = float64("x")
    fgraph = FunctionGraph([x], [exp(exp(x))])
    before = repr(fgraph), frozenset(fgraph.apply_nodes)
    with (
        pytest.raises(BudgetExceeded, match=r"^the call: ") as caught,
        relation_budget("the call", max_seconds=0.1),
    ):
        EquilibriumRewriter([rule]).rewrite(fgraph)
    assert caught.value.budget == "max_seconds"
    fgraph.check_integrity()
    assert (repr(fgraph), frozenset(fgraph.apply_nodes)) == before


@pytest.mark.parametrize("seconds", [math.inf, 1e300])
def test_an_unbounded_or_far_time_limit_runs_the_block(no_timer_left, seconds):
    """math.inf is no time limit, and a deadline past what setitimer takes is armed in steps: neither
    raised OverflowError (Limits(rule_seconds=math.inf) failed every rule run of an exploration)."""
    with relation_budget("far", max_steps=None, max_seconds=seconds) as meter:
        assert list(metered(range(3))) == [0, 1, 2]
    assert meter.error is None


def test_a_clock_left_installed_by_an_interrupted_exit_still_interrupts_and_is_released(no_timer_left):
    """An interrupt landing in the clock's own uninstallation (tests/engine/test_engine_faults.py injects
    one at every line) left it marked installed with a timer time already past: the next budget armed
    nothing and its block spun for good (the suite hung in this file), and no block released the clock."""
    from relwrite.relations import budget

    budget._clock.install()
    budget._clock.armed = time.perf_counter() - 1.0  # the alarm it waited for is long gone
    with pytest.raises(BudgetExceeded), relation_budget("after a cut-short exit", max_seconds=0.05):
        spin()
    assert not budget._clock.installed  # released by the block: nothing held it


def test_a_clock_block_whose_exit_was_cut_short_holds_nothing(no_timer_left):
    """An interrupt at the line of a `budget_clock` block's exit that gives the clock back left it held for
    good (a count never decremented): later tests that set their own SIGALRM handler found it installed,
    and the suite died of "Alarm clock".  A block holds the clock only while its frame lives."""
    from relwrite.relations import budget

    with budget.budget_clock():
        assert budget._clock.held()
    budget._clock.install()  # what a cut-short exit leaves: installed, held by no living block
    assert not budget._clock.held()
    with budget.budget_clock():
        assert budget._clock.held() and budget._clock.active()
    assert not budget._clock.installed and signal.getsignal(signal.SIGALRM) == signal.SIG_DFL


def test_someone_elses_handler_set_over_the_clock_is_not_taken_for_it(no_timer_left):
    """A handler set over an installed clock is left in charge: a budget arms no timer whose alarm would
    go to it, and stops its block by reading the clock at the block's steps."""
    from relwrite.relations import budget

    fired = []
    with budget.budget_clock():
        theirs = signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
        try:
            with pytest.raises(BudgetExceeded), relation_budget("under another handler", max_seconds=0.05):
                for _ in metered(itertools.count()):
                    pass
            time.sleep(0.12)  # a timer armed for the block would fire by now
        finally:
            signal.signal(signal.SIGALRM, theirs)
    assert fired == []
