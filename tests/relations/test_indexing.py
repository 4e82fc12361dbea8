"""Indexing rules: on their examples and on generated indexings of inputs, elementwise ops, indexings,
allocs, writes and sums of increments, every answer keeps the values it replaces, forward and
(useless_subtensor, subtensor_lift, the inc-of-zeros rules) backward; useless_subtensor fires exactly on
the identity indexings written `:` or `::1`; merged indexings take what the pair takes, at every length."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import relwrite as rw
from relwrite.backends.numpy.function import numpy_function
from relwrite.engine import rewrite_graph
from relwrite.graph import ops as o
from relwrite.graph.parse import parse
from relwrite.graph.printing import pprint
from relwrite.graph.subtensor import IncSubtensor, Subtensor
from relwrite.relations import Rule, indexing
from tests.relations.rule_checks import assert_answers_keep_values, first_answer

RULES = {r.name: r for r in vars(indexing).values() if isinstance(r, Rule)}

KEYS = [slice(None), slice(1, None), slice(None, None, 2), slice(None, None, -1), slice(0, None, 1), 0, 1, -1]
KEYS += [
    slice(0, None),
    slice(-1, None, -1),
    slice(None, 9),
    slice(-9, None),
    slice(1, 3),
    slice(-3, None, -2),
]
KINDS = ("input", "exp", "mul", "add", "index", "alloc", "increments", "write", "read", "zeros", "filled")
FOCUS = {  # the kinds of graph each rule reads, drawn half the time so that every rule fires on some
    "useless_subtensor": ("input", "exp"),
    "useless_slice": ("input", "index"),
    "useless_slice_write": ("write",),
    "useless_inc_subtensor": ("write",),
    "read_of_write": ("read",),
    "inc_of_filled_zeros_to_set": ("zeros",),
    "inc_of_alloc_zeros_to_set": ("zeros",),
    "inc_subtensor_of_zeros": ("zeros",),
    "set_of_alloc_same_value": ("filled",),
    "set_of_fill_same_value": ("filled",),
    "write_of_alloc": ("write",),
    "subtensor_lift": ("exp", "mul", "add"),
    "subtensor_merge": ("index",),
    "subtensor_of_alloc": ("alloc",),
    "inc_subtensor_serialize": ("increments",),
}


@st.composite
def indexings(draw, kinds=KINDS):
    """v[key] for v an input, an elementwise op, an indexing or an alloc; a write into x[key] (read back
    at key, or into zeros, or of the value already there); or a sum with increments (the kinds drawn from
    `kinds`)."""
    ndim = draw(st.integers(1, 2))
    static = (3, 2)[:ndim]
    x = rw.tensor("x", "float64", draw(st.sampled_from([(None,) * ndim, static])))
    y = rw.tensor("y", "float64", draw(st.sampled_from([x.type.shape, (None,) * x.ndim, (1,) * x.ndim])))

    def key(v):
        return tuple(draw(st.sampled_from(KEYS)) for _ in range(draw(st.integers(1, v.ndim))))

    def keyed(v):  # a key v takes at its static lengths (a literal int beyond one does not build)
        k = key(v)
        try:
            v[k]
        except IndexError:
            assume(False)
        return k

    def value(part):  # a value that fits the part: a scalar, an alloc of one, or an input of its rank
        shapes = [part.type.shape, (1,) * part.ndim, (None,) * part.ndim]
        return draw(
            st.sampled_from(
                [
                    rw.scalar("z"),
                    rw.alloc(rw.scalar("z"), *(1,) * part.ndim),
                    rw.tensor("w", "float64", draw(st.sampled_from(shapes))),
                ]
            )
        )

    def write(base, k, v):
        return draw(st.sampled_from([rw.inc_subtensor, rw.set_subtensor]))(base[k], v)

    kind = draw(st.sampled_from(kinds))
    if kind == "increments":
        terms = [x] + [
            rw.inc_subtensor(
                draw(st.sampled_from([rw.zeros_like(x), rw.zeros_like(x), x])).__getitem__(key(x)),
                rw.scalar(f"z{k}"),
            )
            for k in range(draw(st.integers(1, 3)))
        ]
        return o.add(*draw(st.permutations(terms)))
    if kind in ("write", "read"):
        k = keyed(x)
        written = write(x, k, value(x[k]))
        return written[k] if kind == "read" else written
    if kind == "zeros":
        base = draw(st.sampled_from([rw.zeros_like(x), rw.alloc(rw.constant(0.0), *static), x]))
        k = keyed(base)
        return write(base, k, rw.constant(0.0) if base is x else value(base[k]))
    if kind == "filled":
        c = draw(st.sampled_from([rw.scalar("c"), rw.constant(0.0)]))
        base = draw(st.sampled_from([rw.fill(x, c), rw.alloc(c, *static)]))
        return write(base, keyed(base), c)
    v = {
        "input": lambda: x,
        "exp": lambda: o.exp(x),
        "mul": lambda: o.mul(x, rw.constant(2.0)),
        "add": lambda: o.add(x, y),
        "index": lambda: x[keyed(x)],
        "alloc": lambda: rw.alloc(draw(st.sampled_from([rw.scalar("c"), rw.vector("c")])), 4, 3),
    }[kind]()
    if v.ndim == 0:
        return o.exp(v)
    return v[keyed(v)]


def test_every_indexing_rule_is_generated_for():
    assert set(FOCUS) == set(RULES)


@pytest.mark.parametrize("name", sorted(FOCUS))
@given(data=st.data())
def test_the_rules_keep_the_values_of_generated_indexings(name, data):
    graph = data.draw(st.one_of(indexings(), indexings(FOCUS[name])), label="graph")
    rhs = assert_answers_keep_values(RULES[name], graph, data)
    if name == "useless_subtensor":  # the identity indexings, but those writing a start or stop (x[0:])
        bounded = graph.owner is not None and any(
            isinstance(entry, tuple) and (entry[1] or entry[2])
            for entry in getattr(graph.owner.op, "idx_list", ())
        )
        assert (rhs is not None) == (takes_everything(graph) and not bounded), pprint(graph)


def takes_everything(graph) -> bool:
    """Whether `graph` is an indexing that gives back, in order, every element of an array of three
    distinct elements along each axis."""
    if graph.owner is None or not isinstance(graph.owner.op, Subtensor):
        return False
    indexed, *index = graph.owner.inputs
    probe = rw.tensor("probe", "float64", (None,) * indexed.ndim)
    values = np.arange(3.0**indexed.ndim).reshape((3,) * indexed.ndim)
    taken = numpy_function([probe], graph.owner.op(probe, *index))(values)
    return taken.shape == values.shape and np.array_equal(taken, values)


@pytest.mark.parametrize("name, text", [(n, t) for n, r in RULES.items() for t in r.examples])
@given(data=st.data())
def test_the_rules_rewrite_their_examples_keeping_their_values(name, text, data):
    rule = RULES[name]
    assert assert_answers_keep_values(rule, parse(text, types=rule.types), data) is not None


# -- useless slices and writes --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("x[0:]", "x"),
        ("x[0::1]", "x"),
        ("s[:7]", "s"),
        ("s[-5:]", "s"),
        ("s[-9:2]", "s[:2]"),
        ("m[1, :]", "m[1]"),
        ("m[1:, 0:]", "m[1:]"),
        ("x[-1::-1]", "x[::-1]"),
        ("s[4::-1]", "s[::-1]"),
        ("s[:-6:-1]", "s[::-1]"),
        ("x[0:n]", "x[:n]"),
    ],
)
def test_useless_slice_omits_the_bounds_that_change_nothing(text, expected):
    types = {"x": "vector", "s": "(5,)", "m": "matrix", "n": "scalar:int64"}
    assert pprint(first_answer(indexing.useless_slice, parse(text, types), "forward")) == expected


@pytest.mark.parametrize(
    "text", ["x[1:]", "x[:-1]", "s[:4]", "s[-4:]", "x[::-1]", "x[:1:-1]", "x[n:]", "x[::n]"]
)
def test_useless_slice_keeps_the_bounds_that_take_something_away(text):
    types = {"x": "vector", "s": "(5,)", "n": "scalar:int64"}
    assert first_answer(indexing.useless_slice, parse(text, types), "forward") is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("set_subtensor(x[:], c)", "fill(x, c)"),
        ("set_subtensor(s[:], t)", "t"),
        ("inc_subtensor(x[:], c)", "(x + c)"),
        ("set_subtensor(s[::-1], t)", "t[::-1]"),
        ("set_subtensor(f[:], c)", "cast(fill(f, c), dtype='float32')"),
        ("inc_subtensor(f[:], c)", "cast((f + c), dtype='float32')"),
    ],
)
def test_a_write_of_the_whole_array_is_its_value_or_a_sum(text, expected):
    types = {"x": "vector", "s": "(3,)", "t": "(3,)", "c": "scalar", "f": "vector:float32"}
    assert pprint(first_answer(indexing.useless_inc_subtensor, parse(text, types), "forward")) == expected


@pytest.mark.parametrize(
    "text", ["set_subtensor(x[:], v)", "inc_subtensor(x[1:], c)", "set_subtensor(x[0], c)"]
)
def test_a_write_whose_value_may_not_fit_or_of_a_part_stays(text):
    """x and v of unknown lengths: v of length 2 does not fit x of length 3, and the write raises."""
    rule = indexing.useless_inc_subtensor
    assert first_answer(rule, parse(text, {"x": "vector", "v": "vector", "c": "scalar"}), "forward") is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("set_subtensor(x[i], c)[i]", "fill(x[i], c)"),
        ("set_subtensor(s[1], c)[1]", "c"),
        ("set_subtensor(s[1:3], t)[1:3]", "t"),
        ("inc_subtensor(x[2:-1], c)[2:-1]", "(x[2:-1] + c)"),
        ("inc_subtensor(f[i], c)[i]", "cast((f[i] + c), dtype='float32')"),
    ],
)
def test_reading_back_a_write_at_the_same_index_is_the_value_written(text, expected):
    types = {
        "x": "vector",
        "s": "(4,)",
        "t": "(2,)",
        "c": "scalar",
        "i": "scalar:int64",
        "f": "vector:float32",
    }
    assert pprint(first_answer(indexing.read_of_write, parse(text, types), "forward")) == expected


@pytest.mark.parametrize(
    "text", ["set_subtensor(x[1:], c)[2:]", "set_subtensor(x[i], c)[j]", "set_subtensor(x[1:], v)[1:]"]
)
def test_a_read_of_another_index_or_of_a_value_that_may_not_fit_stays(text):
    types = {"x": "vector", "v": "vector", "c": "scalar", "i": "scalar:int64", "j": "scalar:int64"}
    assert first_answer(indexing.read_of_write, parse(text, types), "forward") is None


def test_an_out_of_bounds_read_back_still_raises():
    x, i, c = rw.vector("x"), rw.scalar("i", dtype="int64"), rw.scalar("c")
    read = first_answer(indexing.read_of_write, rw.set_subtensor(x[i], c)[i], "forward")
    f = numpy_function([x, i, c], read)
    assert f(np.zeros(3), 2, 5.0) == 5.0
    with pytest.raises(Exception, match="IndexError"):
        f(np.zeros(3), 3, 5.0)


@pytest.mark.parametrize(
    "rule, text, expected",
    [
        (
            "inc_of_filled_zeros_to_set",
            "inc_subtensor(zeros_like(x)[1:], c)",
            "set_subtensor(fill(x, 0.0)[1:], c)",
        ),
        (
            "inc_of_alloc_zeros_to_set",
            "inc_subtensor(alloc(0.0, 3)[1], c)",
            "set_subtensor(alloc(0.0, shape=(3,))[1], c)",
        ),
        ("inc_subtensor_of_zeros", "inc_subtensor(s[1:, 0], 0.0)", "s"),
        ("set_of_alloc_same_value", "set_subtensor(alloc(c, 3)[1:], c)", "alloc(c, shape=(3,))"),
        ("set_of_fill_same_value", "set_subtensor(fill(x, c)[::-1], c)", "fill(x, c)"),
        ("write_of_alloc", "set_subtensor(s[1], alloc(c, 2))", "set_subtensor(s[1], c)"),
    ],
)
def test_writes_into_zeros_of_zeros_of_the_value_there_and_of_allocs(rule, text, expected):
    types = {"x": "vector", "s": "(3, 2)", "c": "scalar"}
    assert pprint(first_answer(RULES[rule], parse(text, types), "forward")) == expected


@pytest.mark.parametrize(
    "rule, text",
    [
        ("inc_of_filled_zeros_to_set", "inc_subtensor(fill(x, 1.0)[1:], c)"),
        ("inc_subtensor_of_zeros", "inc_subtensor(x[0], 0.0)"),  # x may be empty: x[0] raises
        ("inc_subtensor_of_zeros", "inc_subtensor(s[1:], 1.0)"),
        ("set_of_alloc_same_value", "set_subtensor(alloc(c, 3)[1:], d)"),
        ("set_of_fill_same_value", "set_subtensor(fill(x, c)[i], c)"),
        ("write_of_alloc", "set_subtensor(s[1:], alloc(c, 3, 2))"),  # the alloc raises: 3 rows into 2
    ],
)
def test_writes_that_change_something_or_may_raise_stay(rule, text):
    types = {"x": "vector", "s": "(3, 2)", "c": "scalar", "d": "scalar", "i": "scalar:int64"}
    try:
        graph = parse(text, types)
    except TypeError:  # the alloc cannot even be written there
        return
    assert first_answer(RULES[rule], graph, "forward") is None


def test_writes_into_zeros_still_serialize_into_a_sum():
    x, z = rw.vector("x"), rw.scalar("z")
    written = rw.set_subtensor(rw.zeros_like(x)[1:], z)
    assert (
        pprint(first_answer(indexing.inc_subtensor_serialize, x + written, "forward"))
        == "inc_subtensor(x[1:], z)"
    )


# -- merges ---------------------------------------------------------------------------------------------

BOUNDS = st.one_of(st.none(), st.integers(-12, 12))
STEPS = st.one_of(st.none(), st.integers(-4, 4).filter(bool))


@st.composite
def slices(draw):
    return slice(draw(BOUNDS), draw(BOUNDS), draw(STEPS))


@given(
    length=st.integers(0, 11),
    static=st.booleans(),
    inner=slices(),
    outer=st.one_of(slices(), st.integers(-12, 12)),
)
def test_merged_indexings_take_what_the_pair_takes_at_every_length(length, static, inner, outer):
    """x[a:b:c][d:e:f] and x[a:b:c][i], negative bounds and steps included, against NumPy: where x's
    length is static the pair always merges; where it is unknown, a merge (when one literal index fits
    every length) takes the same elements at every length from 0 to 30, raising where the pair raises."""
    x = rw.tensor("x", "float64", (length,) if static else (None,))
    try:
        graph = x[inner][outer]
    except IndexError:  # a literal int beyond the static length: no graph
        return
    merged = first_answer(indexing.subtensor_merge, graph, "forward")
    if static:
        assert merged is not None
    if merged is None:
        return
    assert not (merged.owner is not None and merged.owner.inputs[0].owner is not None), pprint(merged)
    f = numpy_function([x], merged)
    for n in [length] if static else range(31):
        values = np.arange(float(n))
        try:
            expected = values[inner][outer]
        except IndexError:
            with pytest.raises(Exception, match="IndexError"):
                f(values)
            continue
        np.testing.assert_array_equal(f(values), expected)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("x[2:][1]", "x[3]"),
        ("x[::-1][2:]", "x[-3::-1]"),
        ("x[::-1][0]", "x[-1]"),
        ("x[::-1][::-1]", "x"),
        ("x[-3:][::-1]", "x[:-4:-1]"),
        ("x[1:][::-1]", "x[:0:-1]"),
        ("x[:-1][-2:]", "x[-3:-1]"),
        ("x[-5:-1][::-2]", "x[-2:-6:-2]"),
        ("x[::2][1::3]", "x[2::6]"),
        ("m[1:, ::-1][2, 1:]", "m[3, -2::-1]"),
        ("s[::-2][1:-1]", "s[6:0:-2]"),
        ("x[1000:][5:]", "x[1005:]"),  # forward from large literal bounds: no length to check
        ("x[1000:2000:3][5]", "x[1015]"),
    ],
)
def test_merges_with_negative_bounds_and_steps(text, expected):
    types = {"x": "vector", "m": "matrix", "s": "(9,)"}
    assert pprint(first_answer(indexing.subtensor_merge, parse(text, types), "forward")) == expected


@pytest.mark.parametrize("text", ["x[::2][-1:]", "x[2:3][1]", "x[n:][1:]"])
def test_merges_that_depend_on_the_length_or_raise_differently_stay(text):
    """x[::2][-1:] reads the length's parity; x[2:3][1] always raises, x[3] would not."""
    assert (
        first_answer(indexing.subtensor_merge, parse(text, {"x": "vector", "n": "scalar:int64"}), "forward")
        is None
    )


@given(length=st.integers(0, 11), static=st.booleans(), key=slices())
def test_useless_slice_takes_what_the_slice_takes(length, static, key):
    """Omitting bounds never changes what a slice of literal bounds takes, at a static length or at every
    length from 0 to 20, negative bounds and steps included."""
    x = rw.tensor("x", "float64", (length,) if static else (None,))
    canonical = first_answer(indexing.useless_slice, x[key], "forward")
    if canonical is None:
        return
    f = numpy_function([x], canonical)
    for n in [length] if static else range(21):
        values = np.arange(float(n))
        np.testing.assert_array_equal(f(values), values[key])


# -- in the pipelines -----------------------------------------------------------------------------------


@pytest.mark.parametrize("include", [["canonicalize"], ["specialize"], ["fast_run"]])
@pytest.mark.parametrize(
    "text, expected",
    [
        ("x[0:]", "x"),
        ("x[2:][1]", "x[3]"),
        ("x[::-1][2:][1:]", "x[-4::-1]"),
        ("set_subtensor(x[2:5], c)[2:5]", "fill(x[2:5], c)"),
        ("set_subtensor(s[:], t)", "t"),
        ("inc_subtensor(x[1:], alloc(c, 1))", "inc_subtensor(x[1:], c)"),
        ("set_subtensor(alloc(c, 3)[1:], c)", "alloc(c, shape=(3,))"),
    ],
)
def test_the_rules_fire_in_the_phases_pytensor_runs_them_in(include, text, expected):
    types = {"x": "vector", "s": "(3,)", "t": "(3,)", "c": "scalar"}
    assert pprint(rewrite_graph(parse(text, types), include=include)) == expected


def test_inc_into_zeros_is_a_set_in_every_pipeline():
    x, z = rw.vector("x"), rw.scalar("z")
    graph = rw.inc_subtensor(rw.zeros_like(x)[1:], z)
    for include in (["canonicalize"], ["specialize"]):
        rewritten = rewrite_graph(graph, include=include, clone=True)
        assert isinstance(rewritten.owner.op, IncSubtensor) and rewritten.owner.op.set_instead_of_inc
    f = rw.function([x, z], graph, mode="fast_run")
    np.testing.assert_array_equal(f(np.ones(3), 2.0), [0.0, 2.0, 2.0])


def test_a_pipeline_merges_a_chain_of_indexings_into_one():
    x = rw.vector("x")
    graph = x[1:][::-1][1:][::2]
    out = rewrite_graph(graph, include=["fast_run"])
    assert pprint(out) == "x[-2:0:-2]"
    for n in range(8):
        values = np.arange(float(n))
        np.testing.assert_array_equal(numpy_function([x], out)(values), values[1:][::-1][1:][::2])
