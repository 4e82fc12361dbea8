"""Every catalogue rule: its metadata is complete and it is sound forward and backward.

Parametrized by rule name, so a failure names the rule.  The soundness tests
run `relwrite.testing.check_relation`, which generates left sides with random
types (broadcasting included) and values respecting the rule's assumptions.
"""

import ast
from itertools import islice

import pytest
from unification.variable import isvar

from relwrite.engine import EquilibriumRewriter, KanrenRelationSub
from relwrite.graph import ops as o
from relwrite.graph.basic import Op
from relwrite.graph.fg import FunctionGraph
from relwrite.graph.parse import parse
from relwrite.graph.printing import graph_repr
from relwrite.relations import PHASES, Assumption, catalogue, get_rule, rule
from relwrite.relations.docs import rewrite_example_graphs
from relwrite.relations.pattern import can_replace, to_graph
from relwrite.testing import check_relation

RULES = catalogue()
by_name = pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])


def example_names(text: str) -> set[str]:
    """The variable names an example mentions (names that are not called)."""
    tree = ast.parse(text.strip(), mode="eval")
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called}


def test_rule_names_are_unique():
    names = [r.name for r in RULES]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})


@by_name
def test_rule_has_a_phase_tag(rule):
    """Every catalogue rule serves at least one phase (add_zero serves two: no duplicate rule)."""
    assert rule.phases and set(rule.phases) == rule.tags & set(PHASES), sorted(rule.tags)


@by_name
def test_rule_runs_by_default_or_is_opt_in(rule):
    assert "fast_run" in rule.tags or "explore" in rule.tags, sorted(rule.tags)


@by_name
def test_rule_has_tracks(rule):
    assert rule.tracks, "tracks are not set: the engine would try the rule on every node"
    assert all(isinstance(t, Op) or (isinstance(t, type) and issubclass(t, Op)) for t in rule.tracks)


@by_name
def test_rule_examples_parse_with_its_types(rule):
    assert rule.examples, "the rule has no examples"
    for text in rule.examples:
        parse(text, rule.types)


@by_name
def test_rule_rewrites_its_first_example(rule):
    graph = parse(rule.examples[0], rule.types)
    answers = [a for a in islice(rule.forward(graph), 16) if not isvar(a)]
    assert answers, f"{rule.name} does not rewrite its first example {rule.examples[0]!r} at the root"
    replacements = [to_graph(a, like=graph) for a in answers]
    assert any(can_replace(graph, new) for new in replacements), (
        f"every rewrite of {rule.examples[0]!r} changes its type: {[str(r.type) for r in replacements]}"
    )


@by_name
def test_rule_assumptions_parse_and_name_its_variables(rule):
    names = set().union(*(example_names(text) for text in rule.examples))
    for assumption in rule.assumptions:
        assert isinstance(assumption, Assumption)
        assert Assumption.parse(str(assumption)) == assumption
        assert assumption.name in names, f"assumption '{assumption}' names no variable of {rule.examples}"


@by_name
def test_rule_with_assumptions_is_unsafe_or_explore_only(rule):
    """Pipelines cannot check assumptions; exploration reports them with each form it derives."""
    if rule.assumptions:
        assert rule.tags & {"unsafe", "explore"}, "a rule valid only under assumptions must be opt-in"


@by_name
def test_rule_not_run_backward_says_why(rule):
    if not rule.backward:
        assert isinstance(rule.backward_note, str) and rule.backward_note.strip()
    else:
        assert rule.backward_note is None


@by_name
def test_rule_is_sound_forward(rule):
    report = check_relation(rule, direction="forward")
    assert report.examples["forward"] > 0


@by_name
def test_rule_is_sound_backward_or_says_why_not(rule):
    if not rule.backward:
        assert rule.backward_note and len(rule.backward_note) > 10
        with pytest.raises(ValueError, match="backward"):
            check_relation(rule, direction="backward")
        return
    report = check_relation(rule, direction="backward")
    assert report.examples["backward"] > 0


SHORTCUTS = [r for r in RULES if r.composes]


@pytest.mark.parametrize("rule", SHORTCUTS, ids=[r.name for r in SHORTCUTS])
def test_a_shortcut_reaches_in_one_step_what_the_rules_it_composes_reach(rule):
    """A rule that `composes` others is a shortcut: on each of its examples, its one step gives what the
    rewriting engine reaches with only those rules (exploration leaves the shortcut out for them)."""
    assert SHORTCUTS, "the catalogue declares a shortcut: mul_cancel_common"
    composed = EquilibriumRewriter([KanrenRelationSub(get_rule(name)) for name in rule.composes])
    for text in rule.examples:
        _, one_step = rewrite_example_graphs(rule, text)
        graph = FunctionGraph(outputs=[parse(text, rule.types)])
        composed.rewrite(graph)
        assert graph_repr(graph.outputs) == graph_repr([one_step]), text


def test_a_shortcut_names_other_rules():
    with pytest.raises(TypeError, match="composes must name other rules"):
        rule("loop", (o.neg, (o.neg, "x")), "x", ["canonicalize"], composes=("loop",))
    with pytest.raises(TypeError, match="composes must name other rules"):
        rule("bare", (o.neg, (o.neg, "x")), "x", ["canonicalize"], composes="neg_neg")
    with pytest.raises(TypeError, match="composes must name other rules"):
        rule("number", (o.neg, (o.neg, "x")), "x", ["canonicalize"], composes=5)
