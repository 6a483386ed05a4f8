"""A MkDocs hook (mkdocs.yml, ``hooks:``): the docstrings are written for Sphinx as well, and mkdocstrings shows
their roles (``:class:`~schedgym.errors.IllegalDecisionError```) as they are; this renders them as the code
they name, the short name where the target starts with ``~``."""

from __future__ import annotations

import re

_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):<code>(~?)([^<]+)</code>")


def _code(match: re.Match[str]) -> str:
    name = match[2].rsplit(".", 1)[-1] if match[1] else match[2]
    return f"<code>{name}</code>"


def on_page_content(html: str, **kwargs: object) -> str:
    return _ROLE.sub(_code, html)
