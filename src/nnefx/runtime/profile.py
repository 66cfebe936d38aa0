"""Time per operation kind, for ``nnefx run --profile`` and the digits demo.

Timing is opt-in: the run loop only reads the clock when a :class:`Profile` is passed, so an
unprofiled run pays nothing for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Profile:
    """Accumulated kernel time per operation kind over any number of runs."""

    #: kind -> [calls, seconds]
    by_kind: dict[str, list[float]] = field(default_factory=dict)
    runs: int = 0
    #: Wall time of whole runs (kernels plus input checks and bookkeeping).
    total_seconds: float = 0.0

    def add(self, kind: str, seconds: float) -> None:
        entry = self.by_kind.get(kind)
        if entry is None:
            self.by_kind[kind] = [1, seconds]
        else:
            entry[0] += 1
            entry[1] += seconds

    @property
    def kernel_seconds(self) -> float:
        return sum(e[1] for e in self.by_kind.values())

    def rows(self) -> list[tuple[str, int, float]]:
        """(kind, calls, seconds), slowest first."""
        return sorted(((k, int(c), s) for k, (c, s) in self.by_kind.items()), key=lambda r: (-r[2], r[0]))

    def table(self) -> str:
        """A fixed-width table: calls, total and per-call milliseconds, share of kernel time."""
        rows = self.rows()
        width = max([len("(runtime overhead)")] + [len(k) for k, _, _ in rows])
        kernel = self.kernel_seconds or 1e-12
        lines = [f"{'operation':<{width}}  {'calls':>7}  {'total ms':>10}  {'ms/call':>9}  {'share':>6}"]
        for kind, calls, seconds in rows:
            lines.append(f"{kind:<{width}}  {calls:>7}  {seconds * 1e3:>10.3f}  "
                         f"{seconds * 1e3 / max(calls, 1):>9.4f}  {100 * seconds / kernel:>5.1f}%")
        overhead = max(self.total_seconds - self.kernel_seconds, 0.0)
        lines.append(f"{'(kernels)':<{width}}  {sum(r[1] for r in rows):>7}  {self.kernel_seconds * 1e3:>10.3f}")
        lines.append(f"{'(runtime overhead)':<{width}}  {self.runs:>7}  {overhead * 1e3:>10.3f}")
        return "\n".join(lines)
