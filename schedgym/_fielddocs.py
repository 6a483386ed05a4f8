"""Reading the one-line docstrings under dataclass fields (as tyro does), for command-line help."""

from __future__ import annotations

import ast
import inspect


def field_docs(cls: type) -> dict[str, str]:
    """The one-line docstring under each dataclass field (as tyro reads them), for ``--help``."""
    tree = ast.parse(inspect.getsource(cls))
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
