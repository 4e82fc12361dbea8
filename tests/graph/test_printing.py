"""pprint, dprint, graph_repr and to_dot: the seed's printouts and 100,000-node chains."""

import io
import re
import shutil
import subprocess
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relwrite.graph import ops
from relwrite.graph.basic import constant, float64, matrix, scalar, vector
from relwrite.graph.fg import FunctionGraph
from relwrite.graph.printing import (
    DPRINT_INDENT_CAP,
    PICTURE_NODE_LIMIT,
    PICTURE_SECONDS,
    FunctionPrinter,
    OperatorPrinter,
    PPrinter,
    PrefixPrinter,
    dprint,
    graph_repr,
    pprint,
    to_dot,
)
from relwrite.testing import expression_graphs

CHAIN_LENGTH = 100_000


@pytest.fixture(scope="module")
def chain():
    """x followed by 100,000 alternating `+ 1.0` and `exp` nodes."""
    var = float64("x")
    for i in range(CHAIN_LENGTH):
        var = ops.exp(var) if i % 2 else var + 1.0
    return var


@pytest.fixture
def dot_vars():
    return {name: vector(name) for name in "xyzw"} | {"A": matrix("A"), "B": matrix("B")}


# -- pprint: the seed's dot-distribution printouts ------------------------------------------------


def test_pprint_seed_dot_of_sum(dot_vars):
    A, x, y = dot_vars["A"], dot_vars["x"], dot_vars["y"]
    assert pprint(A.dot(x + y)) == "(A @ (x + y))"
    assert pprint(ops.add(A.dot(x), A.dot(y))) == "((A @ x) + (A @ y))"


def test_pprint_seed_nested_sums(dot_vars):
    A, B, x, y, z, w = (dot_vars[n] for n in "ABxyzw")
    assert pprint(A.dot((x + y) + (z + w))) == "(A @ ((x + y) + (z + w)))"
    assert pprint(A.dot(x + (y + B.dot(z + w)))) == "(A @ (x + (y + (B @ (z + w)))))"
    assert pprint(A.dot(x + (y + (B.dot(z) + B.dot(w))))) == "(A @ (x + (y + ((B @ z) + (B @ w)))))"
    distributed = A.dot(x) + (A.dot(y) + (A.dot(B.dot(z)) + A.dot(B.dot(w))))
    assert pprint(distributed) == "((A @ x) + ((A @ y) + ((A @ (B @ z)) + (A @ (B @ w)))))"


def test_pprint_seed_assign_dot_operator_printer_keeps_at(dot_vars):
    A, x, y = dot_vars["A"], dot_vars["x"], dot_vars["y"]
    pprint.assign(ops.dot, OperatorPrinter("@", -1, "left"))
    assert pprint(A.dot(x + y)) == "(A @ (x + y))"


def test_pprint_dot22_prints_as_a_call_so_it_differs_from_dot():
    X, Y = matrix("X"), matrix("Y")
    assert pprint(ops.dot22(X, Y)) == "dot22(X, Y)"


# -- pprint: operators, calls, leaves --------------------------------------------------------------


def test_pprint_variadic_add_is_one_pair_of_parentheses():
    x, y, z = float64("x"), float64("y"), float64("z")
    assert pprint(ops.add(x, y, z)) == "(x + y + z)"
    assert pprint(ops.mul(x, y, z)) == "(x * y * z)"
    assert pprint(ops.add(ops.add(x, y), z)) == "((x + y) + z)"


def test_pprint_single_input_infix_op_prints_as_call():
    x = float64("x")
    assert pprint(ops.add(x)) == "add(x)"
    assert pprint(ops.mul(x)) == "mul(x)"


@pytest.mark.parametrize(
    ("build", "text"),
    [
        (lambda x, y: x - y, "(x - y)"),
        (lambda x, y: x / y, "(x / y)"),
        (lambda x, y: x**y, "(x ** y)"),
        (lambda x, y: x < y, "(x < y)"),
        (lambda x, y: x <= y, "(x <= y)"),
        (lambda x, y: x > y, "(x > y)"),
        (lambda x, y: x >= y, "(x >= y)"),
        (lambda x, y: ops.eq(x, y), "(x == y)"),
        (lambda x, y: ops.neq(x, y), "(x != y)"),
        (lambda x, y: -x, "-x"),
        (lambda x, y: -(x + y), "-(x + y)"),
        (lambda x, y: -ops.exp(x), "-exp(x)"),
        (lambda x, y: ops.neg(-x), "-(-x)"),
        (lambda x, y: (-x) ** y, "((-x) ** y)"),
        (lambda x, y: -(x**y), "-(x ** y)"),
        (lambda x, y: x + (-y), "(x + -y)"),
        (lambda x, y: ops.maximum(x, y), "maximum(x, y)"),
        (lambda x, y: ops.switch(x < y, x, y), "switch((x < y), x, y)"),
        (lambda x, y: ops.exp(x + y), "exp((x + y))"),
    ],
)
def test_pprint_operators_and_calls(build, text):
    assert pprint(build(float64("x"), float64("y"))) == text


def test_pprint_literals():
    x = float64("x")
    assert pprint(x + 2) == "(x + 2.0)"
    assert pprint(x * -1.5) == "(x * -1.5)"
    assert pprint(ops.pow(-2.0, x)) == "((-2.0) ** x)"
    assert pprint(constant(-0.0)) == "-0.0"


def test_pprint_writes_arithmetic_on_two_literals_as_a_call():
    """`parse` computes `2 + 3` and `-(2.0)` as Python does, so such nodes print as calls to read back."""
    x = float64("x")
    assert pprint(ops.add(constant(2), constant(3))) == "add(2, 3)"
    assert pprint(ops.add(2.0, -3.0, x)) == "add(2.0, -3.0, x)"
    assert pprint(ops.add(2.0, x, 3.0)) == "(2.0 + x + 3.0)"
    assert pprint(ops.pow(2, 64)) == "pow(2, 64)"
    assert pprint(ops.true_div(1.0, 0.0)) == "true_div(1.0, 0.0)"
    assert pprint(ops.neg(2.0)) == "neg(2.0)"
    assert pprint(ops.neg(-2.0)) == "neg(-2.0)"
    assert pprint(constant(2.0) < constant(3.0)) == "(2.0 < 3.0)"  # comparisons are not computed
    assert pprint(ops.add(float("inf"), 1.0)) == "(inf + 1.0)"  # inf reads back as a name anyway


def test_pprint_array_constants():
    v = vector("v")
    assert pprint(v + constant([1.0, 2.0])) == "(v + [1.0, 2.0])"
    assert pprint(constant([[1, 2], [3, 4]])) == "[[1, 2], [3, 4]]"
    assert pprint(constant([0.1], dtype="float32")) == "[0.1]"
    assert pprint(constant(list(range(100)))) == "Constant{TensorType(int64, (100,))}"


def test_pprint_named_constant_prints_its_name():
    assert pprint(float64("x") * constant(3.0, name="three")) == "(x * three)"


def test_pprint_calls_show_props_as_keywords():
    A = matrix("A")
    assert pprint(ops.sum(A, axis=0)) == "sum(A, axis=(0,))"
    assert pprint(ops.mean(A)) == "mean(A, axis=None)"
    assert pprint(ops.softmax(A)) == "softmax(A, axis=-1)"
    assert pprint(ops.log_softmax(A, axis=0)) == "log_softmax(A, axis=0)"
    assert pprint(ops.cast(A, "float32")) == "cast(A, dtype='float32')"
    assert pprint(ops.exp(A)) == "exp(A)"


def test_pprint_transpose_is_postfix():
    A, B, x = matrix("A"), matrix("B"), float64("x")
    assert pprint(A.T) == "A.T"
    assert pprint((A + B).T) == "(A + B).T"
    assert pprint((-A).T) == "(-A).T"
    assert pprint(ops.transpose(2.0)) == "(2.0).T"
    assert pprint(ops.transpose(x).T) == "x.T.T"
    assert pprint(vector("v").dimshuffle("x", 0)) == "dimshuffle(v, input_ndim=1, new_order=('x', 0))"


def test_pprint_multi_output_node_indexes_its_outputs():
    a, b = scalar("a"), scalar("b")
    fused = ops.Composite([a, b], [a + b, a * b])
    first, second = fused(vector("x"), vector("y"))
    assert (pprint(first), pprint(second)) == ("fused[(x + y)]", "fused[(x * y)]")
    # call syntax marks which output of a multi-output node is meant
    layout = FunctionPrinter().layout(first.owner, 1)
    assert layout.parts[0] == "composite(" and layout.parts[-1] == ")[1]"


def test_pprint_unnamed_inputs_get_stable_placeholders():
    u, v = vector(), vector()
    assert pprint([u + v, v * u]) == "(_1 + _2)\n(_2 * _1)"
    assert pprint([u + v, v * u]) == "(_1 + _2)\n(_2 * _1)"
    assert pprint(vector("_1") + u) == "(_1 + _2)"


def test_pprint_functiongraph_prints_one_line_per_output():
    x, y = float64("x"), float64("y")
    fgraph = FunctionGraph([x, y], [x + y, ops.exp(x)])
    assert pprint(fgraph) == "(x + y)\nexp(x)"


def test_pprint_assign_op_instance_class_and_predicate():
    x, y = float64("x"), float64("y")
    printer = PPrinter()
    printer.assign(ops.add, FunctionPrinter("plus"))
    assert printer(x + y) == "plus(x, y)"
    printer.assign(ops.Mul, OperatorPrinter("times", -1, "either"))
    assert printer(x * y) == "(x times y)"
    printer.assign(lambda var: var.owner.op == ops.exp and var.name == "e", FunctionPrinter("EXP"))
    named = ops.exp(x)
    named.name = "e"
    assert printer(named + ops.exp(y)) == "plus(EXP(x), exp(y))"
    printer.assign(ops.Neg, PrefixPrinter("~"))
    assert printer(-x) == "~x"
    assert pprint(x + y) == "(x + y)", "assigning on another printer must not touch pprint"


def test_pprint_instance_beats_class_whatever_the_order():
    x, y = float64("x"), float64("y")
    printer = PPrinter()
    printer.assign(ops.sub, FunctionPrinter("minus"))
    printer.assign(ops.Sub, FunctionPrinter("difference"))
    assert printer(x - y) == "minus(x, y)"


def test_pprint_assign_rejects_bad_keys_and_printers():
    printer = PPrinter()
    with pytest.raises(TypeError, match="expected an Op, an Op class or a predicate"):
        printer.assign("add", FunctionPrinter())
    with pytest.raises(TypeError, match="no layout"):
        printer.assign(ops.add, "+")
    with pytest.raises(ValueError, match="assoc"):
        OperatorPrinter("+", 0, "sideways")


def test_pprint_rejects_what_is_not_a_graph():
    with pytest.raises(TypeError, match="expected a Variable"):
        pprint(3)
    with pytest.raises(TypeError, match="expected a Variable"):
        pprint([float64("x"), 3])


def test_pprint_refuses_exponential_expansion_of_shared_subterms():
    var = float64("x")
    for _ in range(64):
        var = var + var
    with pytest.raises(ValueError, match=r"terms .* use graph_repr or dprint"):
        pprint(var)
    x = float64("x")
    shared_twice = ops.add(x, x) * float64("y")  # 5 terms: mul, add, x, x, y
    assert PPrinter(max_terms=5)(shared_twice) == "((x + x) * y)"
    with pytest.raises(ValueError, match="5 terms \\(limit 4\\)"):
        PPrinter(max_terms=4)(shared_twice)


@pytest.mark.slow
def test_pprint_long_chain(chain):
    text = pprint(chain)
    assert text.startswith("exp((exp((")
    assert text.count("exp(") == CHAIN_LENGTH // 2
    assert text.count("+ 1.0)") == CHAIN_LENGTH // 2


# -- dprint -----------------------------------------------------------------------------------------


def test_dprint_seed_add_of_one_variable_twice(capsys):
    y = float64("y")
    assert dprint(ops.add(y, y)) is None
    assert capsys.readouterr().out == "add [id A] ''\n |y [id B]\n |y [id B]\n"


def test_dprint_seed_variadic_mul():
    x, y, z = float64("x"), float64("y"), float64("z")
    assert dprint(ops.mul(x, y, z), file="str") == "mul [id A] ''\n |x [id B]\n |y [id C]\n |z [id D]\n"


def test_dprint_shared_node_is_expanded_once():
    x, y, z = float64("x"), float64("y"), float64("z")
    shared = ops.add(y, z)
    out = ops.true_div(ops.mul(shared, x), shared)
    out.name = "ratio"
    assert dprint(out, file="str") == (
        "true_div [id A] 'ratio'\n"
        " |mul [id B] ''\n"
        " | |add [id C] ''\n"
        " | | |y [id D]\n"
        " | | |z [id E]\n"
        " | |x [id F]\n"
        " |add [id C] ''\n"
    )


@pytest.mark.parametrize("mode", ["fast_compile", "fast_run"])
def test_dprint_of_a_compiled_function_prints_the_graph_it_runs(mode):
    from relwrite.compile.function import function

    x = vector("x")
    compiled = function([x], ops.exp(x) * 2.0 + ops.exp(x), mode=mode)
    text = dprint(compiled, file="str")
    assert text == dprint(compiled.fgraph, file="str")  # rewritten: not the graph it was built from
    assert text != dprint(ops.exp(x) * 2.0 + ops.exp(x), file="str")
    assert pprint(compiled) == pprint(compiled.fgraph) and graph_repr(compiled) == graph_repr(compiled.fgraph)


def test_dprint_several_outputs_share_ids():
    x, y = float64("x"), float64("y")
    shared = x + y
    fgraph = FunctionGraph([x, y], [shared, ops.exp(shared)], clone=False)
    assert dprint(fgraph, file="str") == (
        "add [id A] ''\n |x [id B]\n |y [id C]\nexp [id D] ''\n |add [id A] ''\n"
    )


def test_dprint_leaves_show_constants_and_unnamed_types():
    text = dprint(vector() * 2.0, file="str")
    assert text == "mul [id A] ''\n |<TensorType(float64, (None,))> [id B]\n |2.0 [id C]\n"


def test_dprint_ids_continue_past_z():
    leaves = [float64(f"v{i}") for i in range(30)]
    ids = re.findall(r"\[id (\w+)\]", dprint(ops.add(*leaves), file="str"))
    assert ids[:3] == ["A", "B", "C"]
    assert ids[25:29] == ["Z", "BA", "BB", "BC"]


def test_dprint_multi_output_node_labels_the_output():
    a, b = scalar("a"), scalar("b")
    first, second = ops.Composite([a, b], [a + b, a * b])(float64("x"), float64("y"))
    text = dprint([first, second], file="str")
    assert text.splitlines() == [
        "Composite{add, mul}.0 [id A] ''",
        " |x [id B]",
        " |y [id C]",
        "Composite{add, mul}.1 [id A] ''",
    ]


def test_dprint_writes_to_a_file_object():
    buffer = io.StringIO()
    assert dprint(ops.exp(float64("x")), file=buffer) is None
    assert buffer.getvalue() == "exp [id A] ''\n |x [id B]\n"
    with pytest.raises(TypeError, match="file must be"):
        dprint(float64("x"), file=3)


def test_dprint_caps_indentation_with_the_depth():
    var = float64("x")
    for _ in range(DPRINT_INDENT_CAP + 2):
        var = ops.exp(var)
    lines = dprint(var, file="str").splitlines()
    assert re.fullmatch(r"( \|){50}exp \[id \w+\] ''", lines[DPRINT_INDENT_CAP])
    assert re.fullmatch(r"\[51\] \|exp \[id \w+\] ''", lines[DPRINT_INDENT_CAP + 1])
    assert re.fullmatch(r"\[52\] \|x \[id \w+\]", lines[-1])


def test_dprint_of_a_compiled_function_with_types():
    from relwrite.compile.function import function

    x = vector("x")
    compiled = function([x], ops.exp(x) * 2.0 + ops.log(x), mode="fast_compile")
    assert dprint(compiled, file="str", print_type=True) == (
        "add [id A] <TensorType(float64, (None,))> ''\n"
        " |log [id B] <TensorType(float64, (None,))> ''\n"
        " | |x [id C] <TensorType(float64, (None,))>\n"
        " |mul [id D] <TensorType(float64, (None,))> ''\n"
        " | |2.0 [id E] <TensorType(float64, ())>\n"
        " | |exp [id F] <TensorType(float64, (None,))> ''\n"
        " | | |x [id C] <TensorType(float64, (None,))>\n"
    )
    assert dprint(compiled, file="str", depth=2) == "add [id A] ''\n |log [id B] ''\n |mul [id C] ''\n"
    assert dprint(compiled, file="str", depth=1) == "add [id A] ''\n"
    assert dprint(compiled, file="str", depth=0) == ""


def test_dprint_type_of_each_output_of_a_multi_output_node():
    a, b = scalar("a"), scalar("b")
    first, second = ops.Composite([a, b], [a + b, a > b])(float64("x"), float64("y"))
    lines = dprint([first, second], file="str", print_type=True).splitlines()
    assert lines[0].endswith("[id A] <TensorType(float64, ())> ''")
    assert lines[-1].endswith("[id A] <TensorType(bool, ())> ''")


def test_dprint_expands_a_node_cut_off_by_depth_where_it_is_next_within_reach():
    y = float64("y")
    shared = ops.exp(y)
    assert dprint(ops.add(ops.log(shared), shared), file="str", depth=2) == (
        "add [id A] ''\n |log [id B] ''\n |exp [id C] ''\n"
    )
    assert dprint(ops.add(ops.log(shared), shared), file="str", depth=3) == (
        "add [id A] ''\n |log [id B] ''\n | |exp [id C] ''\n |exp [id C] ''\n | |y [id D]\n"
    )


@pytest.mark.parametrize("depth", [-2, 1.5, True, "2"])
def test_dprint_rejects_a_depth_that_is_not_a_level_count(depth):
    with pytest.raises(ValueError, match="depth must be -1 \\(no limit\\) or a number of levels >= 0, got"):
        dprint(float64("x"), file="str", depth=depth)
    with pytest.raises(TypeError, match="print_type must be True or False, got 'yes'"):
        dprint(float64("x"), file="str", print_type="yes")


def _level(line):
    bars = re.match(r"\[(\d+)\] \||((?: \|)*)", line)
    return int(bars.group(1)) if bars.group(1) else len(bars.group(2)) // 2


@given(expression_graphs(max_nodes=12), st.integers(min_value=1, max_value=14))
def test_dprint_depth_bounds_the_levels_and_only_ever_adds_lines(graph, depth):
    _, output = graph
    full = dprint(output, file="str").splitlines()
    cut = dprint(output, file="str", depth=depth).splitlines()
    assert all(_level(line) < depth for line in cut)
    assert cut[0] == full[0] and [line for line in full if _level(line) == 0] == [cut[0]]
    assert len(cut) <= len(dprint(output, file="str", depth=depth + 1).splitlines()) <= len(full)
    assert dprint(output, file="str", depth=13) == "\n".join(full) + "\n"  # deeper than any 12-node graph
    typed = dprint(output, file="str", print_type=True, depth=depth).splitlines()
    assert [re.sub(r" <TensorType\([^>]*\)>", "", line) for line in typed] == cut


@pytest.mark.slow
def test_dprint_with_types_and_depth_on_a_long_chain(chain):
    lines = dprint(chain, file="str", print_type=True).splitlines()
    assert len(lines) == CHAIN_LENGTH + 1 + CHAIN_LENGTH // 2
    assert all(" <TensorType(float64, ())>" in line for line in lines)
    # 10 levels (exp at the even ones), and the `1.0` of each `+ 1.0` above the last level
    assert len(dprint(chain, file="str", depth=10).splitlines()) == 10 + 4


@pytest.mark.slow
def test_dprint_long_chain_is_linear(chain):
    text = dprint(chain, file="str")
    lines = text.splitlines()
    assert len(lines) == CHAIN_LENGTH + 1 + CHAIN_LENGTH // 2  # every node, x, and each `1.0`
    assert max(map(len, lines)) < 2 * DPRINT_INDENT_CAP + 40
    assert sum(line.startswith(f"[{CHAIN_LENGTH}] |x [id ") for line in lines) == 1


# -- graph_repr -------------------------------------------------------------------------------------


def test_graph_repr_seed_strings():
    x, y, z = float64("x"), float64("y"), float64("z")
    seed = ops.add(z, ops.mul(ops.true_div(ops.mul(y, x), y), ops.true_div(z, x)))
    assert graph_repr([seed]) == "add(z, mul(true_div(mul(y, x), y), true_div(z, x)))"
    assert graph_repr([ops.add(z, ops.mul(x, ops.true_div(z, x)))]) == "add(z, mul(x, true_div(z, x)))"
    unmerged = ops.true_div(ops.mul(ops.add(y, z), x), ops.add(y, z))
    assert graph_repr([unmerged]) == "true_div(mul(add(y, z), x), add(y, z))"
    shared = ops.add(y, z)
    assert graph_repr([ops.true_div(ops.mul(shared, x), shared)]) == "true_div(mul(*1 -> add(y, z), x), *1)"
    assert graph_repr([x]) == "x"


def test_functiongraph_repr_uses_graph_repr():
    x, y, z = float64("x"), float64("y"), float64("z")
    shared = ops.add(y, z)
    fgraph = FunctionGraph([x, y, z], [ops.true_div(ops.mul(shared, x), shared)])
    assert repr(fgraph) == "FunctionGraph(true_div(mul(*1 -> add(y, z), x), *1))"


def test_graph_repr_tags_across_outputs_in_order_of_appearance():
    x, y = float64("x"), float64("y")
    first, second = x + y, x * y
    outputs = [ops.exp(second), ops.sub(first, second), first]
    assert graph_repr(outputs) == "exp(*1 -> mul(x, y)), sub(*2 -> add(x, y), *1), *2"


def test_graph_repr_leaves_are_never_tagged():
    x = float64("x")
    assert graph_repr([ops.add(x, x, 2.0), x]) == "add(x, x, 2.0), x"


def test_graph_repr_shows_op_props_and_output_indices():
    a, b = scalar("a"), scalar("b")
    first, second = ops.Composite([a, b], [a + b, a * b])(float64("x"), float64("y"))
    assert graph_repr([second, first]) == "*1 -> Composite{add, mul}(x, y)::1, *1::0"
    assert graph_repr([ops.sum(matrix("A"), axis=1)]) == "Sum{axis=(1,)}(A)"


@pytest.mark.slow
def test_graph_repr_long_chain(chain):
    text = graph_repr([chain])
    assert text.startswith("exp(add(exp(add(")
    assert text.endswith("x, 1.0)" + "), 1.0)" * (CHAIN_LENGTH // 2 - 1) + ")")


# -- to_dot ----------------------------------------------------------------------------------------


def test_to_dot_structure():
    x, y = float64("x"), float64("y")
    out = ops.exp(x * y + 1.0)
    text = to_dot(out)
    assert text.startswith('digraph "relwrite" {\n')
    assert text.endswith("}\n")
    assert len(re.findall(r"shape=box", text)) == 3
    assert len(re.findall(r"shape=ellipse", text)) == 4  # x, y, 1.0 and the output: results are edges
    assert re.search(r'v\d+ \[label="x", shape=ellipse, style=filled, fillcolor="#b8e0b8"\]', text)
    assert re.search(r'v\d+ \[label="1.0", shape=ellipse, style=filled, fillcolor="#e0e0e0"\]', text)
    assert re.search(r'o0 \[label="output 0", shape=ellipse, style=filled, fillcolor="#b8d0f0"\]', text)
    assert re.search(r'v\d+ -> a\d+ \[headlabel="1"\];', text)  # the mul's second input
    exp_box = re.search(r'(a\d+) \[label="exp\\nfloat64 \(\)", shape=box\]', text).group(1)
    add_box = re.search(r'(a\d+) \[label="add\\nfloat64 \(\)", shape=box\]', text).group(1)
    assert f"{add_box} -> {exp_box};" in text  # a result is the edge to its reader, a single input unlabelled
    assert f"{exp_box} -> o0;" in text


def test_to_dot_escapes_labels_and_labels_outputs_of_multi_output_nodes():
    a, b = scalar("a"), scalar("b")
    first, second = ops.Composite([a, b], [a + b, a * b])(float64('say "hi"'), float64("y"))
    text = to_dot([first, second])
    assert r'label="say \"hi\""' in text
    assert re.search(r"a0 -> o0 \[taillabel=0\];", text)
    assert re.search(r"a0 -> o1 \[taillabel=1\];", text)
    assert "fused\\n(#0 + #1)\\n(#0 * #1)" in text  # a fused node shows what it computes


def test_to_dot_leaf_output_is_drawn():
    x = float64("x")
    assert re.search(r'v0 \[label="x", shape=ellipse, style=filled, fillcolor="#b8d0f0"\]', to_dot(x))


@pytest.mark.slow
def test_to_dot_long_chain_is_linear(chain):
    text = to_dot(chain)
    assert text.count("shape=box") == CHAIN_LENGTH
    assert text.count("shape=ellipse") == 1 + CHAIN_LENGTH // 2 + 1  # x, the 1.0s, the output
    assert len(text) < 200 * CHAIN_LENGTH


def test_to_dot_fills_what_a_rewrite_changed_and_draws_before_and_after():
    from relwrite.engine import rewrite_graph
    from relwrite.graph.printing import to_dot_pair

    x, y = vector("x"), vector("y")
    before = ops.log(1.0 + ops.exp(x)) * y
    after = rewrite_graph(before, include=["canonicalize", "stabilize"], clone=True)
    text = to_dot(after, before=before)
    changed = re.findall(r'label="([^"]*)", shape=box, style=filled, fillcolor="#f8c890"', text)
    assert [label.split("\\n")[0] for label in changed] == ["softplus", "mul"]  # y is read by a new node
    pair = to_dot_pair(before, after)
    assert "subgraph cluster_b {" in pair and "subgraph cluster_a {" in pair
    assert pair.count('fillcolor="#f8c890"') == 2  # only in the after graph


def test_to_dot_expands_a_fused_node_into_its_inner_graph():
    a, b = scalar("a"), scalar("b")
    fused = ops.Composite([a, b], [ops.exp(a) * b + 2.0])(vector("x"), vector("y"))
    text = to_dot(fused, expand=True)
    assert "subgraph cluster_a0 {" in text
    assert re.search(r'a0_n\d \[label="exp", shape=box\]', text)
    assert 'a0_i0 [label="#0", shape=ellipse];' in text


def test_notebooks_show_graphs_as_html_text_without_graphviz(monkeypatch):
    import shutil

    from relwrite.compile.function import function
    from relwrite.graph.fg import FunctionGraph

    monkeypatch.setattr(shutil, "which", lambda name: None)
    x = vector("x")
    out = ops.exp(x) + 1.0
    assert out._repr_html_() == "<pre>(exp(x) + 1.0)</pre>"
    assert "<b>FunctionGraph</b>" in FunctionGraph([x], [out])._repr_html_()
    compiled = function([x], out, mode="fast_compile")
    assert "<pre>" in compiled._repr_html_() and repr(compiled).startswith("<compiled function (x)")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot program is not installed")
def test_notebooks_show_graphs_as_svg_with_graphviz():
    x = vector("x")
    html = (ops.exp(x) + 1.0)._repr_html_()
    assert html.startswith("<svg") and "exp" in html


def deep_graph_with_shared_leaves(length: int) -> FunctionGraph:
    """A chain of `length` nodes reading three shared constants and, every fourth node, a shared input:
    each shared leaf has edges into every rank of the layout."""
    x, y = vector("x"), vector("y")
    shared = [constant(value) for value in (1.0, 2.0, 0.5)]
    var = x
    for i in range(length):
        var = (ops.add, ops.mul, ops.sub)[i % 3](var, shared[i % 3]) if i % 4 else ops.mul(var, y)
    return FunctionGraph([x, y], [var], clone=False)


def test_to_dot_draws_each_use_of_a_constant_and_no_label_midway_along_an_edge():
    text = to_dot(deep_graph_with_shared_leaves(100))
    constant = r'(v\d+) \[label="[^"]*", shape=ellipse, style=filled, fillcolor="#e0e0e0"\]'
    constants = re.findall(constant, text)
    assert len(constants) == 75  # one per use
    assert all(len(re.findall(rf"\b{c} -> ", text)) == 1 for c in constants)
    assert len(re.findall(r'label="y", shape=ellipse', text)) == 1  # an input is drawn once
    assert not re.search(r"-> \w+ \[label=", text)  # a mid-edge label doubles the layout's ranks


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot program is not installed")
def test_a_deep_graph_with_shared_leaves_shows_in_a_notebook_without_a_wait():
    graph = deep_graph_with_shared_leaves(100)
    start = time.monotonic()
    html = graph._repr_html_()
    # A guard, not a measurement: this graph waited out dot's old 10 s timeout, then showed as text.
    assert time.monotonic() - start < PICTURE_SECONDS + 6.0
    assert "<svg" in html or "<pre>" in html


def test_graphviz_gets_a_tight_time_limit(monkeypatch):
    calls = []

    def dot(command, **kwargs):
        calls.append(kwargs["timeout"])
        return subprocess.CompletedProcess(command, 0, "<?xml?><svg>drawn</svg>", "")

    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/dot")
    monkeypatch.setattr(subprocess, "run", dot)
    assert deep_graph_with_shared_leaves(100)._repr_html_().endswith("<svg>drawn</svg>")
    assert calls == [PICTURE_SECONDS] and PICTURE_SECONDS <= 2.0


def test_a_graph_over_the_picture_limit_shows_as_text_without_running_graphviz(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/dot")
    monkeypatch.setattr(subprocess, "run", lambda *args, **kwargs: pytest.fail("dot was run"))
    html = deep_graph_with_shared_leaves(PICTURE_NODE_LIMIT + 1)._repr_html_()
    assert html.startswith("<b>FunctionGraph</b><br><pre>(((")
    doubled = vector("x")
    for _ in range(PICTURE_NODE_LIMIT + 1):  # 2 ** 201 terms written out: shown with its sharing
        doubled = doubled + doubled
    assert doubled._repr_html_().startswith("<pre>add(*1 -&gt; add(*2 -&gt; add(")


def test_pprint_shows_a_fused_node_as_its_expression_over_its_inputs():
    from relwrite.graph.basic import scalar

    a, b = scalar("a"), scalar("b")
    inner = ops.add(ops.exp(a), ops.mul(2.0, b), b)
    fused = ops.Composite([a, b], [inner, ops.neg(a)])
    x, y = matrix("x"), matrix("y")
    first, second = fused(ops.add(x, y), y)
    assert pprint(first) == "fused[(exp((x + y)) + (2.0 * y) + y)]"
    assert pprint(second) == "fused[-(x + y)]"
