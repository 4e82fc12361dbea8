"""Indexing rules: on their examples and on generated indexings of inputs, elementwise ops, indexings,
allocs and sums of increments, every answer keeps the values it replaces, forward and (useless_subtensor,
subtensor_lift) backward; useless_subtensor fires exactly on the identity indexings written `:` or `::1`."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import relwrite as rw
from relwrite.backends.numpy.function import numpy_function
from relwrite.graph import ops as o
from relwrite.graph.parse import parse
from relwrite.graph.printing import pprint
from relwrite.graph.subtensor import Subtensor
from relwrite.relations import Rule, indexing
from tests.relations.rule_checks import assert_answers_keep_values

RULES = {r.name: r for r in vars(indexing).values() if isinstance(r, Rule)}

KEYS = [slice(None), slice(1, None), slice(None, None, 2), slice(None, None, -1), slice(0, None, 1), 0, 1, -1]
KINDS = ("input", "exp", "mul", "add", "index", "alloc", "increments")
FOCUS = {  # the kinds of graph each rule reads, drawn half the time so that every rule fires on some
    "useless_subtensor": ("input", "exp"),
    "subtensor_lift": ("exp", "mul", "add"),
    "subtensor_merge": ("index",),
    "subtensor_of_alloc": ("alloc",),
    "inc_subtensor_serialize": ("increments",),
}


@st.composite
def indexings(draw, kinds=KINDS):
    """v[key] for v an input, an elementwise op, an indexing or an alloc; or a sum with increments (the
    kinds drawn from `kinds`)."""
    x = rw.tensor("x", "float64", (None,) * draw(st.integers(1, 2)))
    y = rw.tensor("y", "float64", draw(st.sampled_from([x.type.shape, (None,) * x.ndim, (1,) * x.ndim])))

    def key(v):
        return tuple(draw(st.sampled_from(KEYS)) for _ in range(draw(st.integers(1, v.ndim))))

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
    v = {
        "input": lambda: x,
        "exp": lambda: o.exp(x),
        "mul": lambda: o.mul(x, rw.constant(2.0)),
        "add": lambda: o.add(x, y),
        "index": lambda: x[key(x)],
        "alloc": lambda: rw.alloc(draw(st.sampled_from([rw.scalar("c"), rw.vector("c")])), 4, 3),
    }[kind]()
    if v.ndim == 0:
        return o.exp(v)
    return v[key(v)]


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
