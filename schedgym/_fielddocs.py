"""Reading the one-line docstrings under dataclass fields (as tyro does), for command-line help, and the
options of a configuration made of nested dataclasses."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap


def field_docs(cls: type) -> dict[str, str]:
    """The one-line docstring under each dataclass field (as tyro reads them), for ``--help``."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))  # a class defined in a function is indented
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for prev, node in zip(body, body[1:], strict=False):
        if (
            isinstance(prev, ast.AnnAssign)
            and isinstance(prev.target, ast.Name)
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            docs[prev.target.id] = node.value.value.strip()
    return docs


def option_fields(cls: type) -> list[tuple[dataclasses.Field, str]]:
    """The options of a dataclass made of groups, each ``(field, its docstring)``: a field whose default is
    built by a dataclass (``field(default_factory=SomeConfig)``) is a group, whose fields are walked in turn;
    every other field is an option. The command lines are built from these (``schedgym train``), so that a
    field added to a group is an option, with its docstring as its help, without being named anywhere else."""
    out: list[tuple[dataclasses.Field, str]] = []
    docs = field_docs(cls)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        factory = f.default_factory
        if isinstance(factory, type) and dataclasses.is_dataclass(factory):
            out += option_fields(factory)
        else:
            out.append((f, docs.get(f.name, "")))
    return out
