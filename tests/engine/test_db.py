"""The rewrite database: queries, sequence and equilibrium databases, optdb, modes and rewrite_graph."""

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relwrite import FunctionGraph, constant, exp, float64, log, mul, neg, pprint, sin
from relwrite.engine import (
    MODES,
    EquilibriumDB,
    EquilibriumRewriter,
    GraphRewriter,
    MergeRewriter,
    PatternSub,
    Query,
    SequenceDB,
    SequentialRewriter,
    mode_query,
    optdb,
    rewrite_graph,
)

EXP_LOG = PatternSub((exp, (log, "a")), "a", name="exp_log")
NEG_NEG = PatternSub((neg, (neg, "a")), "a", name="neg_neg")


class Step(GraphRewriter):
    def apply(self, fgraph):
        return None


# -- Query ---------------------------------------------------------------------------------------------


def test_query_fields_accept_a_tag_a_list_or_none():
    query = Query(include="a", require=["b", "c"], exclude=None)
    assert query.include == frozenset({"a"})
    assert query.require == frozenset({"b", "c"})
    assert query.exclude == frozenset()
    with pytest.raises(TypeError, match="tags must be strings, got 3"):
        Query(include=["a", 3])


def test_query_refinements_return_new_queries():
    query = Query(include=["a"], require=["b"], exclude=["c"])
    assert query.including("x", "y").include == {"a", "x", "y"}
    assert query.excluding("z").exclude == {"c", "z"}
    assert query.requiring("r").require == {"b", "r"}
    assert query == Query(include=["a"], require=["b"], exclude=["c"])
    assert hash(query) == hash(Query(include=["a"], require=["b"], exclude=["c"]))


@pytest.mark.parametrize(
    ("query", "selected"),
    [
        (Query(include=["fast"]), {"one", "two", "three"}),
        (Query(include=["fast"], require=["stable"]), {"one", "three"}),
        (Query(include=["fast"], require=["stable", "cheap"]), {"three"}),
        (Query(include=["fast"], exclude=["cheap"]), {"one", "two"}),
        (Query(include=["fast"], exclude=["two"]), {"one", "three"}),  # a name counts as a tag
        (Query(include=["two", "slow"]), {"two", "four"}),
        (Query(include=["missing"]), set()),
        (Query(include=[], require=["stable"]), set()),  # include is the starting point
    ],
)
def test_include_require_exclude(query, selected):
    db = SequenceDB()
    db.register("one", Step(), "fast", "stable")
    db.register("two", Step(), "fast")
    db.register("three", Step(), "fast", "stable", "cheap")
    db.register("four", Step(), "slow")
    assert {step.name for step in db.query(query).rewriters} == selected


# -- registration --------------------------------------------------------------------------------------


def test_duplicate_registration_names_the_name():
    db = SequenceDB("mydb")
    db.register("merge", MergeRewriter())
    with pytest.raises(ValueError, match=r"'merge' is already registered in SequenceDB\(mydb\)"):
        db.register("merge", MergeRewriter())


def test_a_failed_duplicate_registration_keeps_the_first_entry():
    db = SequenceDB("mydb")
    first = Step()
    db.register("step", first, "t")
    with pytest.raises(ValueError, match=r"'step' is already registered in SequenceDB\(mydb\)"):
        db.register("step", Step(), "u")
    assert db["step"] is first and db.tags_of("step") == {"t", "mydb"}


def test_duplicate_registration_says_how_to_replace():
    db = SequenceDB("mydb")
    db.register("step", Step())
    with pytest.raises(ValueError, match="pass overwrite_existing=True to replace it"):
        db.register("step", Step())
    with pytest.raises(TypeError, match="overwrite_existing must be True or False, got 'yes'"):
        db.register("step", Step(), overwrite_existing="yes")


def test_overwrite_existing_replaces_the_item_tags_and_position():
    db = SequenceDB("mydb")
    db.register("a", Step(), "t", position=1)
    db.register("b", Step(), "t", position=2)
    second = Step()
    db.register("a", second, "t", "u", position=3, overwrite_existing=True)
    assert db["a"] is second and db.tags_of("a") == {"t", "u", "mydb"} and db.names() == ["a", "b"]
    assert [s.name for s in db.query(Query(include=["t"])).rewriters] == ["b", "a"]
    assert [s for s in db.query(Query(include=["u"])).rewriters] == [second]
    db.register("fresh", Step(), overwrite_existing=True)  # nothing to replace: a plain registration
    assert "fresh" in db


def test_overwriting_a_rule_changes_what_the_database_rewrites():
    db = EquilibriumDB("simplify")
    db.register("rule", EXP_LOG, "safe")
    x = float64("x")
    assert pprint(rewrite_graph(exp(log(neg(neg(x)))), include=["safe"], db=db)) == "-(-x)"
    db.register("rule", NEG_NEG, "safe", overwrite_existing=True)
    assert pprint(rewrite_graph(exp(log(neg(neg(x)))), include=["safe"], db=db)) == "exp(log(x))"


def test_a_rejected_overwrite_keeps_the_old_entry():
    db = SequenceDB("mydb")
    first = Step()
    db.register("a", first, "t")
    db.register("b", Step(), "fast")
    with pytest.raises(ValueError, match="the tag 'b' of 'a' is the name of another entry"):
        db.register("a", Step(), "b", overwrite_existing=True)
    assert db["a"] is first and db.tags_of("a") == {"t", "mydb"}
    db.register("b", Step(), "b", overwrite_existing=True)  # an entry's old tags leave with it...
    assert db.tags_of("b") == {"b", "mydb"}
    db.register("fast", Step())  # ...so its old tag 'fast' is free as a name


@given(st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from([0.0, 1.0, 2.0, "last"])), max_size=12))
def test_overwriting_keeps_the_last_registration_at_the_first_ones_turn(registrations):
    db = SequenceDB()
    expected: dict[str, tuple[Step, float]] = {}  # the model: name -> (item, position), in first-seen order
    for name, position in registrations:
        step = Step()
        db.register(name, step, "t", position=position, overwrite_existing=True)
        others = [p for n, (_, p) in expected.items() if n != name]
        at = max(others, default=0.0) + 1 if position == "last" else position
        expected[name] = (step, at)
    assert db.names() == list(expected) and all(db[n] is item for n, (item, _) in expected.items())
    first_seen = {name: k for k, name in enumerate(expected)}
    order = sorted(expected, key=lambda n: (expected[n][1], first_seen[n]))
    assert [s.name for s in db.query(Query(include=["t"])).rewriters] == order


def test_a_name_equal_to_another_entrys_tag_is_rejected_naming_both():
    db = SequenceDB("mydb")
    db.register("one", Step(), "fast")
    with pytest.raises(
        ValueError,
        match=r"the name 'fast' is a tag of 'one' in SequenceDB\(mydb\); "
        r"a query for 'fast' would select both",
    ):
        db.register("fast", Step())
    assert db.names() == ["one"]


def test_a_tag_equal_to_another_entrys_name_is_rejected_naming_both():
    db = SequenceDB("mydb")
    db.register("one", Step(), "fast")
    with pytest.raises(
        ValueError,
        match=r"the tag 'one' of 'two' is the name of another entry in SequenceDB\(mydb\); "
        r"a query for 'one' would select both",
    ):
        db.register("two", Step(), "fast", "one")
    assert db.names() == ["one"]
    assert [s.name for s in db.query(Query(include=["one"])).rewriters] == ["one"]


def test_a_name_equal_to_the_databases_name_is_rejected():
    db = EquilibriumDB("simplify")
    with pytest.raises(ValueError, match=r"the name 'simplify' is the name of EquilibriumDB\(simplify\)"):
        db.register("simplify", EXP_LOG)
    db.register("own_tag", Step(), "own_tag")  # an entry may carry its own name as a tag
    assert db.tags_of("own_tag") == {"own_tag", "simplify"}


_LABELS = st.sampled_from(["a", "b", "c", "d"])


@given(st.lists(st.tuples(_LABELS, st.frozensets(_LABELS, max_size=3)), max_size=8))
def test_a_query_for_a_name_selects_exactly_that_entry(registrations):
    db = SequenceDB()
    for name, tags in registrations:
        with contextlib.suppress(ValueError):
            db.register(name, Step(), *tags)
    for name in db.names():
        assert [s.name for s in db.query(Query(include=[name])).rewriters] == [name]


def test_nested_names_and_tags_cover_every_level():
    inner = EquilibriumDB("inner")
    inner.register("exp_log", EXP_LOG, "fast")
    outer = SequenceDB("outer")
    outer.register("inner", inner, "slow")
    outer.register("again", inner, "slow")  # the same database twice is walked once
    outer.register("merge", MergeRewriter(), "cheap")
    assert outer.nested_names() == {"inner", "again", "merge", "exp_log"}
    assert outer.nested_tags() == {"slow", "cheap", "outer", "fast", "inner"}
    assert {"canonicalize", "fast_run", "unsafe", "merge1", "constant_folding"} <= (
        optdb.nested_names() | optdb.nested_tags()
    )


def test_registration_checks_its_arguments():
    db = SequenceDB("mydb")
    with pytest.raises(TypeError, match="non-empty string"):
        db.register("", Step())
    with pytest.raises(TypeError, match="position must be a number or 'last', got 'first'"):
        db.register("step", Step(), position="first")
    with pytest.raises(TypeError, match="'node' must be a graph rewriter or a database"):
        db.register("node", EXP_LOG)
    with pytest.raises(TypeError, match="'graph' must be a node or graph rewriter"):
        EquilibriumDB().register("graph", SequenceDB())


def test_lookup_and_removal():
    db = SequenceDB("mydb")
    step = Step()
    db.register("step", step, "t")
    assert "step" in db and db["step"] is step and db.names() == ["step"]
    assert db.tags_of("step") == {"t", "mydb"}  # entries carry the database's name as a tag
    db.remove("step")
    assert "step" not in db
    with pytest.raises(KeyError, match="'step' is not registered"):
        db["step"]
    with pytest.raises(KeyError, match="'step' is not registered"):
        db.remove("step")


# -- SequenceDB and EquilibriumDB --------------------------------------------------------------------


def test_sequence_db_orders_by_position_then_registration():
    db = SequenceDB()
    for name, position in [("late", 10), ("first", -1), ("mid_a", 2.5), ("mid_b", 2.5), ("early", 0.5)]:
        db.register(name, Step(), "t", position=position)
    db.register("appended", Step(), "t")  # 'last': after every position so far
    sequence = db.query(Query(include=["t"]))
    assert isinstance(sequence, SequentialRewriter)
    assert [s.name for s in sequence.rewriters] == ["first", "early", "mid_a", "mid_b", "late", "appended"]


def test_equilibrium_db_builds_one_equilibrium_rewriter():
    db = EquilibriumDB("simplify", max_use_ratio=3)
    db.register("exp_log_rule", EXP_LOG, "safe")
    db.register("neg_neg_rule", NEG_NEG, "safe", "fast")
    db.register("merge", MergeRewriter(), "safe")
    rewriter = db.query(Query(include=["safe"], exclude=["fast"]))
    assert isinstance(rewriter, EquilibriumRewriter)
    assert rewriter.name == "simplify" and rewriter.max_use_ratio == 3
    assert rewriter.node_rewriters == [EXP_LOG] and len(rewriter.graph_rewriters) == 1
    x = float64("x")
    fgraph = FunctionGraph([x], [sin(exp(log(neg(neg(x)))))])
    db.query(Query(include=["simplify"])).rewrite(fgraph)  # the database's name selects every entry
    assert repr(fgraph) == "FunctionGraph(sin(x))"


def test_equilibrium_db_names_unnamed_rewriters_after_their_entry():
    unnamed = Step()
    db = EquilibriumDB()
    db.register("my_step", unnamed)
    assert unnamed.name == "my_step"
    db.register("exp_log_again", EXP_LOG)
    assert EXP_LOG.name == "exp_log"  # a named rewriter keeps its name


def test_nested_databases_get_the_query_or_their_subquery():
    inner = EquilibriumDB("inner")
    inner.register("exp_log", EXP_LOG, "fast")
    inner.register("neg_neg", NEG_NEG, "fast", "experimental")
    outer = SequenceDB("outer")
    outer.register("inner", inner, "fast", position=1)
    outer.register("merge", MergeRewriter(), "fast", position=0)

    sequence = outer.query(Query(include=["fast"]))
    assert [s.name for s in sequence.rewriters] == ["merge", "inner"]
    assert sequence.rewriters[1].node_rewriters == [EXP_LOG, NEG_NEG]

    sub = Query(include=["fast"], subquery={"inner": Query(include=["fast"], exclude=["experimental"])})
    assert outer.query(sub).rewriters[1].node_rewriters == [EXP_LOG]


# -- optdb and modes --------------------------------------------------------------------------------------


def test_optdb_structure():
    positions = {name: optdb._entries[name].position for name in optdb.names()}
    assert positions["merge1"] == 0
    assert positions["canonicalize"] == 1
    assert positions["stabilize"] == 1.5
    assert positions["specialize"] == 2
    assert positions["merge2"] == 49
    assert isinstance(optdb["merge1"], MergeRewriter) and isinstance(optdb["merge2"], MergeRewriter)
    for name in ("canonicalize", "stabilize", "specialize"):
        assert isinstance(optdb[name], EquilibriumDB)
    assert "constant_folding" in optdb["canonicalize"]


IN_PLACE = ["add_destroy_handler", "inplace_marks"]
FULL_PIPELINE = [
    "merge1",
    "canonicalize",
    "stabilize",
    "specialize",
    "elemwise_fusion",
    "merge2",
    *IN_PLACE,
    "merge3",
]


@pytest.mark.parametrize(
    ("mode", "steps"),
    [
        ("fast_compile", ["merge1", "canonicalize", "stabilize"]),
        ("o1", ["merge1", "canonicalize", "stabilize"]),
        ("o2", ["merge1", "canonicalize", "stabilize"]),
        ("o3", ["merge1", "canonicalize", "stabilize", "specialize"]),
        ("fast_run", FULL_PIPELINE),
        ("o4", FULL_PIPELINE),
    ],
)
def test_modes_select_the_pipeline(mode, steps):
    assert mode in MODES
    assert [step.name for step in optdb.query(mode_query(mode)).rewriters] == steps


def test_fast_compile_stabilizes_only_what_would_overflow_and_what_pytensor_canonicalizes():
    """What overflows (log of softmax, log of a sum of exp, exp over its sum) and PyTensor's canonicalize
    rewrites of sigmoids (odds, sigmoid of a logit), with their mul(-1, .) twins."""
    stabilize = optdb.query(mode_query("fast_compile")).rewriters[-1]
    names = {r.name.removesuffix("_times_minus_one") for r in stabilize.node_rewriters}
    overflowing = {"log_softmax", "logsumexp", "logsumexp_keepdims", "softmax", "vector_softmax"}
    sigmoids = {"odds_sigmoid", "odds_sigmoid_neg", "inverse_odds_sigmoid", "inverse_odds_sigmoid_neg"}
    assert names == overflowing | sigmoids | {"sigmoid_logit"}


def test_mode_query():
    query = Query(include=["x"])
    assert mode_query(query) is query
    with pytest.raises(ValueError, match=r"unknown mode 'fastest'; known modes: fast_compile, fast_run"):
        mode_query("fastest")


# -- rewrite_graph ---------------------------------------------------------------------------------------


def test_rewrite_graph_of_a_variable_in_place():
    x = float64("x")
    inner = exp(log(x))
    out = sin(inner)
    result = rewrite_graph(out, include=[], custom_rewrite=EquilibriumRewriter([EXP_LOG]))
    assert result is out  # the output node itself was not replaced, only its input
    assert out.owner.inputs[0] is x


def test_rewrite_graph_of_a_variable_with_clone_leaves_the_callers_graph():
    x = float64("x")
    out = sin(exp(log(x)))
    result = rewrite_graph(out, include=[], custom_rewrite=EquilibriumRewriter([EXP_LOG]), clone=True)
    assert pprint(result) == "sin(x)" and result is not out
    assert pprint(out) == "sin(exp(log(x)))"


def test_rewrite_graph_returns_the_new_output_when_the_output_is_replaced():
    x = float64("x")
    out = exp(log(x))
    assert rewrite_graph(out, include=[], custom_rewrite=EquilibriumRewriter([EXP_LOG])) is x


def test_rewrite_graph_of_a_list():
    x = float64("x")
    outs = [exp(log(x)), sin(neg(neg(x)))]
    result = rewrite_graph(outs, include=[], custom_rewrite=EquilibriumRewriter([EXP_LOG, NEG_NEG]))
    assert isinstance(result, list) and result[0] is x and pprint(result[1]) == "sin(x)"
    assert outs[1].owner.inputs[0] is x  # rewritten in place

    outs = [exp(log(x)), sin(neg(neg(x)))]
    copies = rewrite_graph(
        outs, include=[], custom_rewrite=EquilibriumRewriter([EXP_LOG, NEG_NEG]), clone=True
    )
    assert [pprint(c) for c in copies] == ["x", "sin(x)"] and copies[0] is not x  # x cloned with the graph
    assert [pprint(o) for o in outs] == ["exp(log(x))", "sin(-(-x))"]


def test_rewrite_graph_of_a_function_graph():
    x = float64("x")
    fgraph = FunctionGraph([x], [sin(exp(log(x)))])
    copy = rewrite_graph(fgraph, include=[], custom_rewrite=EquilibriumRewriter([EXP_LOG]), clone=True)
    assert copy is not fgraph
    assert repr(copy) == "FunctionGraph(sin(x))" and repr(fgraph) == "FunctionGraph(sin(exp(log(x))))"
    same = rewrite_graph(fgraph, include=[], custom_rewrite=EquilibriumRewriter([EXP_LOG]))
    assert same is fgraph and repr(fgraph) == "FunctionGraph(sin(x))"


def test_rewrite_graph_runs_the_selected_optdb_steps():
    x = float64("x")
    graph = mul(exp(constant(0.0)), x)
    assert pprint(rewrite_graph(graph, clone=True)) == "x"  # canonicalize by default: folds, then x * 1 -> x
    assert pprint(rewrite_graph(graph, include=["fast_run"], clone=True)) == "x"
    unfolded = rewrite_graph(graph, include=["canonicalize"], exclude=["constant_folding"], clone=True)
    assert pprint(unfolded) == "(x * exp(0.0))"  # canonical operand order: inputs before applications
    assert pprint(rewrite_graph(graph, include=[], clone=True)) == "(exp(0.0) * x)"


def test_rewrite_graph_with_a_custom_database():
    db = SequenceDB("mine")
    db.register("simplify", EquilibriumDB("simplify"), "mine")
    db["simplify"].register("exp_log", EXP_LOG, "mine")
    x = float64("x")
    assert rewrite_graph(exp(log(x)), include=["mine"], db=db) is x


@pytest.mark.parametrize("mode", ["fast_compile", "fast_run", "o1", "o2", "o3", "o4"])
def test_log_sum_exp_and_log_softmax_are_stabilized_in_every_mode(mode):
    """PyTensor issue 2288: log(sum(exp(x))) overflows in its fast_compile; relwrite's never does."""
    import numpy as np

    import relwrite as rw
    from relwrite.compile.function import function

    x, m = rw.vector("x"), rw.matrix("m")
    assert function([x], rw.log(rw.sum(rw.exp(x))), mode=mode)(np.array([1000.0, 1000.0])) == pytest.approx(
        1000 + np.log(2)
    )
    assert np.array_equal(
        function([m], rw.log(rw.softmax(m, axis=-1)), mode=mode)(np.array([[0.0, 2000.0]])), [[-2000.0, 0.0]]
    )


def test_a_query_that_is_not_a_query_is_refused_by_name():
    with pytest.raises(TypeError, match=r"expected a Query.* got \['canonicalize'\]"):
        optdb.query(["canonicalize"])
    with pytest.raises(ValueError, match=r"starts with '\+', '-' or '&' .* got 'canonicalize'"):
        optdb.query("canonicalize")


def test_a_query_may_be_spelled_as_tag_strings():
    spelled = optdb.query("+fast_run", "-unsafe", "&canonicalize")
    assert spelled is optdb.query(Query(include=["fast_run"], exclude=["unsafe"], require=["canonicalize"]))
