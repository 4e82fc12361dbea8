"""Extraction: the cheapest tree by a cost, and distinct forms (up to AC) cheapest first."""

import math

from relwrite import matrix, scalar, vector
from relwrite.engine.explore.costs import Depth, Flops, NodeCount
from relwrite.engine.explore.dot import egraph_dot
from relwrite.engine.explore.egraph import EGraph
from relwrite.engine.explore.extract import Trees, best_tree, enumerate_trees
from relwrite.engine.explore.runner import Limits, Runner
from relwrite.graph import ops as o
from relwrite.graph.printing import pprint
from relwrite.relations.registry import get_rule, rule

dot_assoc = rule(
    "dot_assoc", (o.dot, (o.dot, "A", "B"), "C"), (o.dot, "A", (o.dot, "B", "C")), tags=("explore",)
)
dot_distribute = rule(
    "dot_distribute",
    (o.dot, "A", (o.add, "x", "y")),
    (o.add, (o.dot, "A", "x"), (o.dot, "A", "y")),
    tags=("explore", "unsafe"),
)


def grown(expr, rules, direction="both"):
    g = EGraph()
    root = g.intern(expr)
    Runner(g, rules, direction, Limits(seconds=math.inf, rule_seconds=math.inf)).run([root])
    return g, root


def test_the_cheapest_tree_by_node_count():
    x = scalar("x")
    g, root = grown(o.log(1 + o.exp(x)), [get_rule("softplus")])
    trees = Trees(NodeCount())
    t = best_tree(g, root, trees)
    assert pprint(trees.graph(t)) == "softplus(x)"
    assert trees.cost[t] == 2


def test_flops_choose_the_cheap_association_of_a_matrix_chain():
    a, b = matrix("A", shape=(100, 100)), matrix("B", shape=(100, 100))
    x = vector("x", shape=(100,))
    g, root = grown(o.dot(o.dot(a, b), x), [dot_assoc], "forward")
    trees = Trees(Flops())
    t = best_tree(g, root, trees)
    assert pprint(trees.graph(t)) == "(A @ (B @ x))"  # 2 * 2e4 flops, not 2e6 + 2e4
    assert trees.cost[t] < 50_000
    x = matrix("x", shape=(100, 1000))  # now (A @ B) @ x is the cheap one
    g, root = grown(o.dot(a, o.dot(b, x)), [dot_assoc], "backward")
    trees = Trees(Flops())
    assert pprint(trees.graph(best_tree(g, root, trees))) == "((A @ B) @ x)"


def test_depth_prefers_balanced_forms():
    x = scalar("x")
    g, root = grown(o.log(1 + o.exp(x)), [get_rule("softplus"), get_rule("log1p")])
    trees = Trees(Depth())
    t = best_tree(g, root, trees)
    assert trees.cost[t] == 1


def test_forms_are_distinct_up_to_ac_and_cheapest_first():
    x, y, a = vector("x", shape=(4,)), vector("y", shape=(4,)), matrix("A", shape=(3, 4))
    g, root = grown(o.dot(a, x + y), [dot_distribute])
    trees = Trees(NodeCount())
    found = list(enumerate_trees(g, root, trees))
    assert [pprint(trees.graph(t)) for t in found] == ["(A @ (x + y))", "((A @ x) + (A @ y))"]
    costs = [trees.cost[t] for t in found]
    assert costs == sorted(costs)


def test_nested_and_flat_sums_are_one_form():
    xs = [scalar(f"x{k}") for k in range(3)]
    g = EGraph()
    root = g.intern(xs[0] + xs[1] + xs[2])
    nested = g.intern(o.add(xs[0], xs[1] + xs[2]), flatten=False)  # an e-node over the class of x1 + x2
    assert g.find(nested) != g.find(root)
    g.union(root, nested, "test")
    g.rebuild()
    assert len(g.nodes(root)) == 2
    trees = Trees(NodeCount())
    (form,) = enumerate_trees(g, root, trees)
    assert pprint(trees.graph(form)) == "(x0 + x1 + x2)"  # the flat one: fewer nodes


def test_enumeration_is_lazy_and_grows():
    x = scalar("x")
    g, root = grown(
        o.exp(x) * 2.0 + o.exp(x) * 3.0, [get_rule(n) for n in ("collect_terms", "sort_mul", "mul_one")]
    )
    trees = Trees(NodeCount())
    stream = enumerate_trees(g, root, trees, k=1)
    first = next(stream)
    assert trees.cost[first] == min(trees.cost[t] for t in [first, *stream])


def test_deep_classes_extract_without_recursion():
    x = scalar("x")
    e = x
    for k in range(5_000):
        e = o.exp(e) if k % 2 else o.neg(e)
    g = EGraph()
    root = g.intern(e)
    trees = Trees(NodeCount())
    t = best_tree(g, root, trees)
    assert trees.cost[t] == 5_001
    assert next(enumerate_trees(g, root, trees)) == t
    assert trees.graph(t).owner.op == o.exp


def test_the_egraph_picture_has_a_cluster_per_class():
    x = scalar("x")
    g, root = grown(o.log(1 + o.exp(x)), [get_rule("softplus")])
    text = egraph_dot(g, [root])
    assert text.startswith('digraph "egraph"')
    assert text.count("subgraph cluster_") == len(g.reachable([root]))
    assert 'label="softplus"' in text and "lhead=cluster_" in text
