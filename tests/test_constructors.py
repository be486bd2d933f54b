"""Collaborators arrive in one typed object: no constructor takes a dozen loose arguments."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("daemon", "backends")
MAX_ARGUMENTS = 8
"""Parameters an `__init__` may take besides `self`; past it, group them (daemon/services.py)."""


def _arguments(init: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    args = init.args
    named = len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs)
    return named - 1 + (args.vararg is not None) + (args.kwarg is not None)


def constructors(text: str) -> list[tuple[str, int]]:
    """(class name, arguments besides self) of every `__init__` defined in a module's source."""
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                is_function = isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                if is_function and item.name == "__init__":
                    found.append((node.name, _arguments(item)))
    return found


def test_the_walk_counts_every_kind_of_parameter() -> None:
    """Positional-only, keyword-only, *args and **kwargs each count; self does not."""
    source = "class A:\n    def __init__(self, a, /, b, *rest, c, **more): ...\n"
    assert constructors(source) == [("A", 5)]


def test_no_constructor_takes_more_than_eight_arguments() -> None:
    """Every `__init__` in daemon/ and backends/ takes at most eight arguments besides self."""
    too_many = [
        f"{path.relative_to(ROOT)}: {name}.__init__ takes {count}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for name, count in constructors(path.read_text(encoding="utf-8"))
        if count > MAX_ARGUMENTS
    ]
    assert too_many == []
