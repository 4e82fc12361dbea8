"""The check of explored forms: agreement, counterexamples, inputs compared nowhere, no hypothesis."""

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from relwrite import parse
from relwrite.backends.compare import NoUsableExample, SoundnessError
from relwrite.engine.explore.api import share_inputs
from relwrite.engine.explore.checking import ATTEMPTS, check_equal
from relwrite.graph import ops as o
from relwrite.graph.basic import scalar, vector

EQUAL = [
    ("x * (y + z)", "x * y + x * z"),
    ("exp(x) * exp(y)", "exp(x + y)"),
    ("(x + 1) * (x - 1)", "x * x - 1"),
    ("sqrt(x * x)", "abs(x)"),
]


@given(st.sampled_from(EQUAL), st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_equal_expressions_agree_on_every_input_compared(pair, examples, seed):
    left = parse(pair[0])
    right = share_inputs(left, parse(pair[1]))
    compared = check_equal(left, right, (), frozenset({"explore"}), examples, "pair", seed=seed)
    assert 1 <= compared <= examples


def test_a_different_expression_is_a_counterexample_naming_its_inputs():
    x = scalar("x")
    with pytest.raises(SoundnessError, match=r"wrong: values differ.* at x=") as caught:
        check_equal(o.exp(x), o.log(x), (), frozenset({"explore"}), 10, "wrong")
    error = caught.value
    assert set(error.inputs) == {"x"} and error.left_value is not None and error.right_value is not None
    assert not np.allclose(error.left_value, error.right_value, equal_nan=True)


def test_exact_forms_are_compared_at_infinities_and_nan_too():
    x = scalar("x")
    # equal on the finite floats, not at +-inf: max(x, 0) + min(x, 0) is x, and x * 1 - x is 0 but NaN at inf
    with pytest.raises(SoundnessError):
        check_equal(x * 1.0 - x, o.zeros_like(x), (), frozenset(), 30, "exact")
    assert check_equal(x * 1.0 - x, o.zeros_like(x), (), frozenset({"explore"}), 30, "real") == 30


def test_a_condition_that_never_holds_leaves_nothing_compared():
    x = scalar("x")
    with pytest.raises(NoUsableExample, match="no input drawn could be compared") as caught:
        check_equal(x, x + 1.0, [(o.sub(x, x), "!=", 0.0)], frozenset({"unsafe"}), 5, "never")
    assert "nothing finite to compare" in str(caught.value)


def test_the_verdict_is_a_function_of_the_seed():
    x, y = scalar("x"), scalar("y")
    wrong = o.true_div(x, y)
    found = []
    for _ in range(2):
        with pytest.raises(SoundnessError) as caught:
            check_equal(x * y, wrong, (), frozenset({"explore"}), 10, "seeded", seed=7)
        found.append({k: v.tolist() for k, v in caught.value.inputs.items()})
    assert found[0] == found[1]


def test_vectors_get_their_static_lengths_and_unknown_ones_broadcast():
    static, free = vector("a", shape=(4,)), vector("b")
    total = check_equal(static + free, free + static, (), frozenset(), 12, "vectors")
    assert total == 12
    with pytest.raises(ValueError, match="examples must be at least 1"):
        check_equal(static, static, (), frozenset(), 0, "none")
    assert ATTEMPTS >= 2


@pytest.mark.parametrize("start, index", [(2, 1), (10, 5), (40, 3)])
def test_an_index_past_the_first_lengths_is_checked_at_longer_ones(start, index):
    """x[a:][b] reads element a + b: the lengths drawn grow until the input evaluates, and a wrong
    merge is still caught there."""
    x = vector("x")
    assert check_equal(x[start:][index], x[start + index], (), frozenset(), 3, "merge") == 3
    with pytest.raises(SoundnessError):
        check_equal(x[start:][index], x[start + index - 1], (), frozenset(), 3, "wrong merge")


def test_exploring_needs_neither_hypothesis_nor_pytest():
    script = (
        "import sys; sys.modules['hypothesis'] = None; sys.modules['pytest'] = None\n"
        "import relwrite as rw\n"
        "forms = list(rw.explore(rw.parse('log(1 + exp(x))'), limits=rw.Limits(iterations=3, nodes=300)))\n"
        "assert any(f.derivation == 'softplus' for f in forms), forms\n"
        "print(rw.prove(rw.parse('x * y / y'), rw.parse('x'), unsafe=True) is not None)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
