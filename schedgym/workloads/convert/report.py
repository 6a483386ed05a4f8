"""What a conversion kept, changed and dropped, with every reason counted: nothing is dropped silently."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class ConversionReport:
    """Counts of a conversion. ``changed`` and ``dropped`` map a reason to a count; ``examples`` keeps the
    first few source lines of each reason so that a user can look them up."""

    source: str
    rows: int = 0
    kept: int = 0
    changed: Counter = field(default_factory=Counter)
    dropped: Counter = field(default_factory=Counter)
    examples: dict[str, list[int]] = field(default_factory=dict)

    def change(self, reason: str, line: int) -> None:
        self.changed[reason] += 1
        self._example(reason, line)

    def drop(self, reason: str, line: int) -> None:
        self.dropped[reason] += 1
        self._example(reason, line)

    def _example(self, reason: str, line: int) -> None:
        lines = self.examples.setdefault(reason, [])
        if len(lines) < 5:
            lines.append(line)

    def __str__(self) -> str:
        out = [f"{self.source}: {self.rows} rows read, {self.kept} jobs kept, "
               f"{sum(self.changed.values())} of them changed, {sum(self.dropped.values())} rows dropped"]  # fmt: skip
        for title, counts in (("changed", self.changed), ("dropped", self.dropped)):
            for reason, n in counts.most_common():
                out.append(f"  {title}: {n} x {reason} (e.g. lines {', '.join(map(str, self.examples[reason]))})")
        return "\n".join(out)

    def as_dict(self) -> dict:
        return {
            "source": self.source,
            "rows": self.rows,
            "kept": self.kept,
            "changed": dict(self.changed),
            "dropped": dict(self.dropped),
        }
