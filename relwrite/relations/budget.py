"""Budgets on relation runs: the one bound on work and time every rule run is under.

A budget (`relation_budget`) is a context manager.  Work is counted where
relwrite pulls from a run: every state pulled from a relation's goal stream
(`runtime.run_relation`), every match a pattern's matcher proposes and every
value a goal's direct forward call gives is one step (`charge`), so the
count is deterministic; kanren itself is left as it is.  Time is a deadline:
on the main thread a SIGALRM timer (`setitimer`) interrupts the block when
it passes, so even a goal spinning in plain Python (``while True: pass``)
is stopped; off the main thread, where signals do not arrive, the clock is
read as steps are charged (`charging_calls` charges every Python call of a
block that would charge none).  An interrupt falling due inside an import (or
a garbage collection) is put off until it is done: a module cut off
mid-import would stay broken for the rest of the process.

Past its limit a budget raises BudgetExceeded (or the subclass it was given)
naming `what`, and stays spent: every further step raises again and, on the
main thread, the interrupt repeats every `REFIRE` seconds while the block
runs, so code that swallows the error cannot go on.  Budgets nest (each
applies its limits; when several have run out, the outermost one's error is
raised, so an enclosing call's deadline is not mistaken for a rule's); a
timer someone else had running is honoured and given back what is left of
it.  Engines treat a BudgetExceeded whose block has ended as that rule's and
go on, and re-raise one whose block still encloses them (`encloses`).
"""

from __future__ import annotations

import gc
import inspect
import math
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

DEFAULT_MAX_STEPS = 10_000
"""Steps one relation run may take (a catalogue rule takes a few dozen at most)."""
DEFAULT_MAX_SECONDS = 5.0
"""Wall-clock seconds one relation run may take."""
REFIRE = 0.1
"""Seconds between repeated interrupts of a spent block whose code swallowed the error."""
_CLOCK_EVERY = 16
"""Off the main thread, the clock is read every this many steps."""


class BudgetExceeded(Exception):
    """A relation run (or a block under a budget) used up its steps or seconds.

    `budget` says which ("max_steps" or "max_seconds"); `meter` is the
    budget that ran out.
    """

    def __init__(self, message: str, budget: str, meter: Meter | None = None):
        super().__init__(message)
        self.budget, self.meter = budget, meter


class Interrupted(BaseException):
    """A block under a budget ran out and everything inside it must stop.

    Like KeyboardInterrupt it is no Exception, so code that catches
    Exception (a property-test runner, a rule's own try/except) lets it
    through; for calls that are stopped as a whole (exploration's phases),
    where BudgetExceeded is for runs the caller skips and goes on.
    """

    def __init__(self, message: str, budget: str, meter: Meter | None = None):
        super().__init__(message)
        self.budget, self.meter = budget, meter


class Meter:
    """The steps and time a budget's block has used (the context manager `relation_budget` returns).

    Once the budget is exceeded, `error` holds the BudgetExceeded.  It is in
    force only while the block that entered it runs: an interrupt landing in
    its exit can leave it on the thread's stack, where it would otherwise
    fail every later run.
    """

    __slots__ = (
        "deadline",
        "error",
        "error_type",
        "installed",
        "max_seconds",
        "max_steps",
        "owner",
        "steps",
        "what",
    )

    def __init__(
        self,
        what: str | Callable[[], str],
        max_steps: int | None,
        max_seconds: float | None,
        error_type: type[BudgetExceeded | Interrupted],
    ):
        self.what, self.max_steps, self.max_seconds = what, max_steps, max_seconds
        self.error_type = error_type
        self.deadline: float | None = None
        self.steps = 0
        self.error: BudgetExceeded | Interrupted | None = None
        self.installed = False
        self.owner: tuple[int, Any] = (0, None)

    def __enter__(self) -> Meter:
        frame = sys._getframe(1)
        if frame.f_code.co_flags & _SUSPENDABLE or frame.f_globals.get("__name__") == "contextlib":
            frame = _block_frame(frame)  # else the caller's own frame is the block's (the usual case)
        self.owner = (id(frame), frame.f_code)  # by identity: a reference would keep the frame alive
        if self.max_seconds is not None and math.isfinite(self.max_seconds):  # math.inf: no time limit
            self.deadline = time.perf_counter() + self.max_seconds
        _meters().append(self)
        if self.deadline is not None and _can_interrupt():
            self.installed = not _clock.installed
            if self.installed:
                _clock.install()
            if _clock.active():  # else someone set their own handler over it: steps read the clock
                _clock.arm(self.deadline)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        _remove(self)
        if self.installed:
            self.installed = False
            _clock.uninstall()
        elif _clock.installed and not _meters() and not _clock.held():
            _clock.uninstall()  # left installed by an exit an interrupt cut short: nothing holds it now

    def tick(self) -> None:
        """Charge one step; raises this budget's error past its limits."""
        self.steps += 1
        if self.error is None:
            if self.max_steps is not None and self.steps > self.max_steps:
                self.spend("max_steps")
            elif (
                self.deadline is not None
                and not self.steps % _CLOCK_EVERY
                and time.perf_counter() > self.deadline
            ):
                self.spend("max_seconds")
        if self.error is not None:
            if not self.encloses(sys._getframe(1)):
                _remove(self)  # left behind by an interrupted exit: no longer in force
                return
            raise self.fresh_error()

    def spend(self, budget: str) -> None:
        """Mark the budget as exceeded in `budget` (its error is kept for every later step)."""
        if self.error is not None:
            return
        what = self.what() if callable(self.what) else self.what
        if budget == "max_steps":
            why = f"no answer within max_steps={self.max_steps} steps"
        else:
            why = f"no answer within max_seconds={self.max_seconds:g} ({self.steps} steps)"
        self.error = self.error_type(f"{what}: {why}", budget, self)

    def fresh_error(self) -> BudgetExceeded | Interrupted:
        """A new instance of the spent budget's error (raising one instance twice chains its tracebacks)."""
        assert self.error is not None
        return self.error_type(str(self.error), self.error.budget, self)

    def encloses(self, frame: Any = None) -> bool:
        """Whether the block is still running: on the thread's stack, its frame on the call stack of `frame`
        (default: the caller's)."""
        if self not in _meters():
            return False
        owner_id, owner_code = self.owner
        frame = sys._getframe(1) if frame is None else frame
        while frame is not None:
            if id(frame) == owner_id and frame.f_code is owner_code:
                return True
            frame = frame.f_back
        return False


def relation_budget(
    what: str | Callable[[], str],
    max_steps: int | None = DEFAULT_MAX_STEPS,
    max_seconds: float | None = DEFAULT_MAX_SECONDS,
    error: type[BudgetExceeded | Interrupted] = BudgetExceeded,
) -> Meter:
    """A context manager bounding the relation runs inside its block (see the module docstring).

    Past `max_steps` steps or `max_seconds` seconds (None: no such limit)
    the block is stopped with `error` (a subclass of BudgetExceeded or of
    Interrupted) naming `what` (a string, or a function giving it, called
    only then).  The block gets the Meter.
    """
    check_limits(max_steps, max_seconds)
    if not (isinstance(error, type) and issubclass(error, (BudgetExceeded, Interrupted))):
        raise TypeError(f"error must be a subclass of BudgetExceeded or Interrupted, got {error!r}")
    return Meter(what, max_steps, max_seconds, error)


def check_limits(max_steps: int | None, max_seconds: float | None) -> None:
    """ValueError for a step or time limit that is not positive."""
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps must be at least 1, got {max_steps}")
    if max_seconds is not None and not max_seconds > 0:
        raise ValueError(f"max_seconds must be positive, got {max_seconds}")


def charge() -> None:
    """Charge one step to every budget in force on this thread (BudgetExceeded past one's limit)."""
    meters = _meters()
    if meters:
        for meter in meters[:]:
            meter.tick()


def metered(stream: Iterable[Any]) -> Iterator[Any]:
    """`stream`, each pull charged as one step (`charge`)."""
    iterator = iter(stream)
    while True:
        charge()
        try:
            value = next(iterator)
        except StopIteration:
            return
        yield value


@contextmanager
def charging_calls(everywhere: bool = False) -> Iterator[None]:
    """Charge every Python function call inside the block as a step (a trace function), off the main
    thread or `everywhere`: a library's long computation that never charges (SymPy's limits) still reads
    its budget's clock, or counts against its steps.  On the main thread the timer interrupts it, so by
    default nothing is installed there (tracing doubles the cost of the calls)."""
    if (_can_interrupt() and not everywhere) or not _meters():
        yield
        return
    previous = sys.gettrace()

    def trace(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            charge()

    sys.settrace(trace)
    try:
        yield
    finally:
        sys.settrace(previous)


def enclosing_spent(exc: BaseException | None) -> BudgetExceeded | None:
    """The BudgetExceeded among `exc` and the exceptions it was raised while handling whose budget's block
    still encloses the caller: not the error of a run that has ended, but of a call around it."""
    seen: set[int] = set()
    frame = sys._getframe(1)
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, BudgetExceeded) and exc.meter is not None and exc.meter.encloses(frame):
            return exc
        exc = exc.__context__
    return None


_local = threading.local()


def _meters() -> list[Meter]:
    meters = getattr(_local, "meters", None)
    if meters is None:
        meters = _local.meters = []
    return meters


def _remove(meter: Meter) -> None:
    meters = _meters()
    if meters and meters[-1] is meter:  # the innermost, as blocks end
        meters.pop()
        return
    for k in range(len(meters) - 1, -1, -1):
        if meters[k] is meter:
            del meters[k]
            return


_SUSPENDABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def _block_frame(frame: Any) -> Any:
    """The frame a block entered from `frame` runs in: `frame`, or, when the budget was entered inside a
    generator (a `contextlib.contextmanager` wrapping it, say), the nearest caller that is no generator
    and not contextlib: a suspended generator's frame is not on the stack while the block runs."""
    while frame.f_back is not None and (
        frame.f_code.co_flags & _SUSPENDABLE or frame.f_globals.get("__name__") == "contextlib"
    ):
        frame = frame.f_back
    return frame


_raw_handler = getattr(signal, "_signal", signal).getsignal
"""`signal.getsignal` without its conversion of numbers to enum members (a tenth of the cost: it runs
at every timed rule attempt)."""


def _can_interrupt() -> bool:
    return _HAS_TIMER and threading.current_thread() is threading.main_thread()


class _Clock:
    """The main thread's SIGALRM handler and timer, shared by every budget with a deadline.

    Installed by the outermost timed block (or a `budget_clock` scope), the
    timer is armed for the earliest deadline in force and left running when
    a block ends early (the handler then re-arms it or lets it lapse), so a
    budget costs no system call while an earlier alarm is pending.  A timer
    running before installation (someone else's) is kept in the schedule:
    when it falls due, the handler it belongs to is called, and it is
    re-armed with what is left of it on uninstallation.
    """

    def __init__(self) -> None:
        self.installed = False
        self.holders: list[weakref.ref] = []  # the `budget_clock` blocks holding the installation
        self.previous: Any = None
        self.outer: float | None = None  # when someone else's timer falls due
        self.outer_interval = 0.0
        self.armed: float | None = None  # when our timer fires

    def held(self) -> bool:
        """Whether a `budget_clock` block holds the installation (one whose exit an interrupt cut short is
        gone with its frame: it holds nothing)."""
        for ref in self.holders:  # a loop, not any(): this runs at every timed rule attempt
            if ref() is not None:
                return True
        self.holders = []
        return False

    def active(self) -> bool:
        """Whether the handler is installed and still SIGALRM's: someone may have set theirs since, and an
        interrupt may have cut an uninstallation short."""
        return self.installed and _raw_handler(signal.SIGALRM) == self._alarm

    def install(self) -> None:
        self.previous = signal.signal(signal.SIGALRM, self._alarm)
        if self.previous == self._alarm:  # ours, left by a cut-short uninstallation: Python's default
            self.previous = signal.SIG_DFL
        delay, interval = signal.setitimer(signal.ITIMER_REAL, 0)
        self.outer = time.perf_counter() + delay if delay > 0 else None
        self.outer_interval = interval
        self.armed = None
        self.installed = True
        if self.outer is not None:
            self.arm(self.outer)

    def uninstall(self) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        self.installed = False
        self.armed = None
        signal.signal(signal.SIGALRM, self.previous)
        if self.outer is not None:  # give it back what is left of it
            left = max(self.outer - time.perf_counter(), 1e-6)
            signal.setitimer(signal.ITIMER_REAL, left, self.outer_interval)
        self.previous, self.outer = None, None

    def arm(self, when: float) -> None:
        """Make the timer fire no later than `when` (no system call when it already does)."""
        now = time.perf_counter()
        if self.armed is not None and now < self.armed <= when:  # one already in the past is stale
            return
        self.armed = min(when, now + _LONGEST_ALARM)  # a far deadline is reached in steps the handler renews
        signal.setitimer(signal.ITIMER_REAL, max(self.armed - now, 1e-6))

    def _alarm(self, signum: int, frame: Any) -> None:
        now = time.perf_counter()
        self.armed = None
        if self.outer is not None and now >= self.outer:
            self.outer = now + self.outer_interval if self.outer_interval > 0 else None
            self._rearm(now)
            if callable(self.previous):
                self.previous(signum, frame)  # may raise: the enclosing timer's own way of stopping
            elif self.previous == signal.SIG_DFL:  # what SIGALRM would have done
                signal.signal(signal.SIGALRM, signal.SIG_DFL)
                signal.raise_signal(signal.SIGALRM)
        if _in_gc_callback(frame):  # an error raised there is printed and dropped: raise it just after
            self.arm(now + _AFTER_GC)
            return
        if _in_import(frame):  # a module cut off mid-import stays half made: raise it once imported
            self.arm(now + _AFTER_IMPORT)
            return
        for meter in _meters()[:]:  # outermost first
            if meter.deadline is None or now < meter.deadline:
                continue
            if not meter.encloses(frame):
                _remove(meter)
                continue
            meter.spend("max_seconds")
            self._rearm(now)
            raise meter.fresh_error()
        self._rearm(now)

    def _rearm(self, now: float) -> None:
        """Arm the timer for the next deadline in force: a spent block still running repeats its interrupt."""
        due = [m.deadline if m.deadline > now else now + REFIRE for m in _meters() if m.deadline is not None]
        if self.outer is not None:
            due.append(self.outer)
        if due:
            self.arm(min(due))


_LONGEST_ALARM = 86_400.0
"""The longest delay the timer is set for at once (seconds); a later deadline is reached in steps."""

_AFTER_GC = 0.001
"""Seconds an interrupt landing during a garbage collection is put off by."""


class _Collection:
    """Whether the garbage collector is running: an error raised in what it calls (its callbacks,
    weakref callbacks and finalizers of what it frees) is printed and dropped, so an interrupt
    due then is put off until it is done.  The first of `gc.callbacks`, so it knows first."""

    running = False

    @classmethod
    def track(cls, phase: str, info: dict[str, Any]) -> None:
        cls.running = phase == "start"


gc.callbacks.insert(0, _Collection.track)


def _in_gc_callback(frame: Any) -> bool:
    """Whether `frame` runs while the garbage collector does, or runs one of its callbacks (those after
    `_Collection.track` at the end of a collection)."""
    return _Collection.running or any(
        getattr(callback, "__code__", None) is frame.f_code for callback in gc.callbacks
    )


_AFTER_IMPORT = 0.005
"""Seconds an interrupt landing during an import is put off by (again, until the import is done)."""


def _in_import(frame: Any) -> bool:
    """Whether `frame` runs inside an import (a module's code, or the import machinery).

    An error raised there leaves the module's package without it (a later
    import of the package runs its code again, beside submodules that
    stayed), and its importers' names half bound: a library loaded on first
    use under a budget (hypothesis, when a form is checked) would break for
    the rest of the process.
    """
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
            return True
        frame = frame.f_back
    return False


_clock = _Clock()
_HAS_TIMER = hasattr(signal, "setitimer") and hasattr(signal, "SIGALRM")


@contextmanager
def budget_clock() -> Iterator[None]:
    """Keep the handler that interrupts overlong runs installed for the block (a loop running many timed
    runs saves a system call pair per run); without it the outermost timed block installs it itself."""
    if _clock.installed and not _clock.held() and not _meters():
        _clock.uninstall()  # left installed by an exit an interrupt cut short: nothing holds it now
    if _clock.installed or not _can_interrupt():
        yield
        return
    holder = _Holder()
    _clock.install()
    _clock.holders.append(weakref.ref(holder))
    try:
        yield
    finally:
        _clock.holders = [ref for ref in _clock.holders if ref() not in (None, holder)]
        _clock.uninstall()


class _Holder:
    """A `budget_clock` block's token: it lives as long as the block's frame."""

    __slots__ = ("__weakref__",)
