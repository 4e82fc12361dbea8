"""Kernels of composites too large for one loop: run as loops of bounded size over blocks of elements, with
values passed between loops through scratch slots; the same values as NumPy's, bit for bit."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relwrite.backends.c import CLinker, c_available, codegen
from relwrite.backends.numpy import NumpyLinker
from relwrite.engine.fusion import FusionRewriter
from relwrite.graph import ops
from relwrite.graph.basic import constant, tensor
from relwrite.graph.fg import FunctionGraph

pytestmark = pytest.mark.skipif(not c_available(), reason="no working C compiler")

BINARY = [ops.add, ops.sub, ops.mul, ops.maximum, ops.minimum]
UNARY = [ops.neg, ops.abs, ops.sqr]


@st.composite
def arithmetic_dags(draw, dtype: str):
    """A random DAG of arithmetic ops over a vector, a matrix and a scalar: operands drawn from anywhere
    (values read far from where they are computed), several outputs, one constant."""
    x = tensor("x", dtype=dtype, shape=(None,))
    m = tensor("m", dtype=dtype, shape=(None, None))
    s = tensor("s", dtype=dtype, shape=())
    pool = [x, m, s, constant(np.asarray(3, dtype=dtype))]
    for _ in range(draw(st.integers(20, 60))):
        if draw(st.booleans()):
            op = draw(st.sampled_from(BINARY))
            value = op(draw(st.sampled_from(pool)), draw(st.sampled_from(pool)))
        else:
            value = draw(st.sampled_from(UNARY))(draw(st.sampled_from(pool)))
        pool.append(value)
    computed = [v for v in pool if v.owner is not None]
    outputs = [ops.add(*computed[-6:]), *draw(st.lists(st.sampled_from(computed), max_size=4))]
    return [x, m, s], outputs


@contextmanager
def small_loops() -> Iterator[None]:
    """Chunking from 12 statements on, in loops of 5 reading at most 3 earlier values, over blocks of 16,
    so small graphs take that path."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(codegen, "LOOP_STATEMENTS", 12)
        patch.setattr(codegen, "CHUNK_STATEMENTS", 5)
        patch.setattr(codegen, "CHUNK_READS", 3)
        patch.setattr(codegen, "CHUNK_BLOCK", 16)
        yield


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_a_chunked_kernel_computes_numpys_values_bit_for_bit(dtype, data):
    inputs, outputs = data.draw(arithmetic_dags(dtype))
    fgraph = FunctionGraph(inputs, outputs)
    FusionRewriter().rewrite(fgraph)
    with small_loops():
        linker = CLinker(fgraph)
    assert linker.c_nodes  # the composite runs in C
    rows, cols = data.draw(st.integers(1, 3)), data.draw(st.sampled_from([1, 15, 16, 17, 40]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    values = [rng.integers(-9, 9, shape).astype(dtype) for shape in ((cols,), (rows, cols), ())]
    values[1] = np.asfortranarray(values[1]) if data.draw(st.booleans()) else values[1]  # a strided operand
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got, want = linker(*values), NumpyLinker(fgraph)(*values)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def test_a_large_composite_runs_as_loops_of_bounded_size():
    x = tensor("x", shape=(None,))
    value = x
    for k in range(40):
        value = ops.add(ops.mul(value, x), constant(float(k)))
    fgraph = FunctionGraph([x], [value])
    FusionRewriter().rewrite(fgraph)
    (node,) = fgraph.apply_nodes
    with small_loops():
        kernel = codegen.composite_kernel(node.op, "rw_k0")
        linker = CLinker(fgraph)
    loops = re.findall(r"for \(ptrdiff_t j = 0; j < m; j\+\+\) \{(.*?)\n    \}", kernel.source, re.S)
    assert len(loops) == 16  # 80 statements in loops of 5
    assert all(body.count(" = (double)(") <= 5 for body in loops)
    assert "malloc" in kernel.source  # scratch per call, not on the stack: a block of each passed value
    values = np.linspace(-1, 1, 1001)
    np.testing.assert_array_equal(linker(values)[0], NumpyLinker(fgraph)(values)[0])


@settings(max_examples=60, deadline=None)
@given(
    reads=st.lists(st.lists(st.integers(0, 10**6), max_size=6), min_size=1, max_size=300),
    most=st.integers(1, 12),
    most_reads=st.integers(1, 12),
)
def test_loops_keep_the_statements_in_order_within_their_bounds(reads, most, most_reads):
    """`_chunks` cuts the statements, in order, into loops of at most CHUNK_STATEMENTS statements that
    read at most CHUNK_READS values of earlier loops (one statement reading more is a loop alone), and
    starts a new loop only when the next statement would break a bound."""
    statements = [
        codegen._Statement(f"t{k};", f"t{k}", "float64", tuple(f"t{r % k}" for r in picks) if k else ())
        for k, picks in enumerate(reads)
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(codegen, "CHUNK_STATEMENTS", most)
        patch.setattr(codegen, "CHUNK_READS", most_reads)
        chunks = codegen._chunks(statements)
    assert [st for chunk in chunks for st in chunk] == statements
    loop_of = {st.name: c for c, chunk in enumerate(chunks) for st in chunk}

    def earlier_reads(chunk, c):
        return {n for st in chunk for n in st.reads if loop_of[n] < c}

    for c, chunk in enumerate(chunks):
        assert 1 <= len(chunk) <= most
        assert len(earlier_reads(chunk, c)) <= most_reads or len(chunk) == 1
        if c + 1 < len(chunks):  # the next loop's first statement did not fit in this one
            extended = [*chunk, chunks[c + 1][0]]
            assert len(extended) > most or len(earlier_reads(extended, c)) > most_reads


def test_a_small_composite_stays_one_loop():
    x = tensor("x", shape=(None,))
    fgraph = FunctionGraph([x], [ops.add(ops.mul(x, x), constant(1.0))])
    FusionRewriter().rewrite(fgraph)
    (node,) = fgraph.apply_nodes
    assert "malloc" not in codegen.composite_kernel(node.op, "rw_k0").source


@settings(max_examples=10, deadline=None)
@given(st.lists(st.sampled_from(range(5)), min_size=17, max_size=70), st.sampled_from([ops.add, ops.mul]))
def test_a_long_add_or_mul_folds_sixteen_operands_per_statement_with_numpys_values(picks, op):
    """Operands of mixed dtypes promote step by step as NumPy folds them; split into statements, the
    steps and their dtypes stay the same."""
    dtypes = ["bool", "int8", "int32", "float32", "float64"]
    inputs = [tensor(f"x{k}", dtype=d, shape=(None,)) for k, d in enumerate(dtypes)]
    inner = [tensor(f"x{k}", dtype=d, shape=()) for k, d in enumerate(dtypes)]
    composite = ops.Composite(inner, [op(*(inner[k] for k in picks))])
    fgraph = FunctionGraph(inputs, [composite(*inputs)])
    source = codegen.composite_kernel(composite, "rw_k0").source
    statements = re.findall(r"const \w+ t\d+ = (.*);", source)
    assert len(statements) >= 2 and all(len(re.findall(r"\b[tv]\d+\b", s)) <= 16 for s in statements)
    rng = np.random.default_rng(len(picks))
    values = [rng.integers(-3, 4, 33).astype(d) for d in dtypes]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        (got,), (want,) = CLinker(fgraph)(*values), NumpyLinker(fgraph)(*values)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
