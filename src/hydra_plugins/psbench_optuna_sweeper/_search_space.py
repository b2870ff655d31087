"""Hydra sweep syntax → Optuna distributions, and the expressions of ``derived``/``constraints``.

Supported sweep syntax (Hydra's override grammar):

* ``choice(a, b, …)`` and ``a,b,…`` → categorical;
* ``range(start, stop[, step])`` → categorical over the values (stop excluded, as in Hydra);
* ``interval(lo, hi)`` → float uniform; ``int(interval(lo, hi))`` → integer;
  ``tag(log, interval(lo, hi))`` → log-uniform (also with ``int(...)``).

``derived`` values and ``constraints`` are arithmetic over the sampled values, written with
their config keys (``protocol.n <= learners``, ``batch_size: 128 // learners``): numbers,
``+ - * / // % **``, comparisons, ``and/or/not``, ``x if c else y``, lists/indexing and
``min max abs int float round log2 sqrt``. Nothing else evaluates, so a config cannot run
code. This is how Rudra Table 2's μλ = const (§5.3) is written as a search space.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, Override, RangeSweep, Transformer
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

CASE_PARAM = "case"


def _plain(v: Any) -> Any:
    return v if isinstance(v, bool | int | float | str) or v is None else str(v)


def distribution(override: Override) -> BaseDistribution:
    """The Optuna distribution of one sweep override (see the module docstring)."""
    value = override.value()
    key = override.get_key_element()
    if isinstance(value, ChoiceSweep):
        return CategoricalDistribution([_plain(v) for v in override.sweep_iterator(transformer=Transformer.encode)])
    if isinstance(value, RangeSweep):
        return CategoricalDistribution([_plain(v) for v in override.sweep_iterator(transformer=Transformer.encode)])
    if isinstance(value, IntervalSweep):
        log = "log" in value.tags
        assert value.start is not None and value.end is not None  # an interval's ends (Hydra's grammar)
        if isinstance(value.start, int) and isinstance(value.end, int):
            return IntDistribution(int(value.start), int(value.end), log=log)
        return FloatDistribution(float(value.start), float(value.end), log=log)
    raise ValueError(f"{key}: not a sweep (choice, range, interval): {override.input_line}")


def parse(params: Mapping[str, str], arguments: list[str]) -> tuple[dict[str, BaseDistribution], list[str]]:
    """Search space and fixed overrides from ``hydra.sweeper.params`` and the command line.

    Command-line sweeps (``learners=choice(1,2)``, ``learners=1,2``) join the space and win
    over ``params``; non-sweep command-line overrides are passed to every job unchanged.
    """
    parser = OverridesParser.create()
    space: dict[str, BaseDistribution] = {}
    fixed: list[str] = []
    for o in parser.parse_overrides([f"{k}={v}" for k, v in params.items()]):
        space[o.get_key_element()] = distribution(o)
    for o in parser.parse_overrides(list(arguments)):
        key = o.get_key_element()
        if o.is_sweep_override():
            space[key] = distribution(o)
        else:
            space.pop(key, None)
            assert o.input_line is not None  # parsed from a line
            fixed.append(o.input_line)
    return space, fixed


def case_overrides(cases: Mapping[str, Any]) -> dict[str, list[str]]:
    """``cases`` as label → override list (a mapping ``{key: value}`` or a list of ``key=value``)."""
    out: dict[str, list[str]] = {}
    for label, body in cases.items():
        if isinstance(body, Mapping):
            out[str(label)] = [f"{k}={_override_value(v)}" for k, v in body.items()]
        elif isinstance(body, str):
            out[str(label)] = body.split()
        else:
            out[str(label)] = [str(x) for x in body]
    return out


def _override_value(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if v is None:
        return "null"
    if isinstance(v, list | tuple):
        return "[" + ",".join(_override_value(x) for x in v) + "]"
    return str(v)


def case_values(overrides: list[str]) -> dict[str, Any]:
    """The ``key=value`` pairs of a case, values parsed as numbers where they are numbers."""
    out: dict[str, Any] = {}
    for o in OverridesParser.create().parse_overrides(overrides):
        out[o.get_key_element().lstrip("+~")] = o.value()
    return out


# --------------------------------------------------------------------------- expressions
_BIN = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_CMP = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_FUNCS: dict[str, Callable[..., Any]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "int": int,
    "float": float,
    "round": round,
    "log2": math.log2,
    "sqrt": math.sqrt,
}


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def evaluate(expr: str, values: Mapping[str, Any]) -> Any:
    """Evaluate a ``derived``/``constraints`` expression over ``values`` (dotted config keys)."""
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError as err:
        raise ValueError(f"cannot parse expression {expr!r}: {err.msg}") from None

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str | bool):
            return node.value
        name = _dotted(node)
        if name is not None and isinstance(node, ast.Name | ast.Attribute):
            if name not in values:
                raise ValueError(f"expression {expr!r}: unknown name {name!r} (known: {', '.join(sorted(values))})")
            return values[name]
        if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
            return _BIN[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp):
            v = ev(node.operand)
            if isinstance(node.op, ast.USub):
                return -v
            if isinstance(node.op, ast.UAdd):
                return +v
            if isinstance(node.op, ast.Not):
                return not v
        if isinstance(node, ast.BoolOp):
            vals = [ev(v) for v in node.values]
            return all(vals) if isinstance(node.op, ast.And) else any(vals)
        if isinstance(node, ast.Compare):
            left = ev(node.left)
            for op, comp in zip(node.ops, node.comparators, strict=True):
                right = ev(comp)
                if type(op) not in _CMP or not _CMP[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return ev(node.body) if ev(node.test) else ev(node.orelse)
        if isinstance(node, ast.List | ast.Tuple):
            return [ev(e) for e in node.elts]
        if isinstance(node, ast.Subscript):
            return ev(node.value)[ev(node.slice)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
            return _FUNCS[node.func.id](*[ev(a) for a in node.args])
        raise ValueError(f"expression {expr!r}: {ast.dump(node)[:60]} is not allowed")

    return ev(tree)
