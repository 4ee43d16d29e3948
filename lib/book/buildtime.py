"""The book's build time as the reproducibility appendix reports it: only what was measured.

The executor (``python -m tools.book``) rebuilds ``_build/timings.json`` from the chapters'
execution records after every chapter it publishes: ``{"chapters": {name: {"seconds", "scale",
"measured", "machine", "workers"}}, "missing": [names]}``, where ``missing`` names the chapters
that have no record (never executed here, or failed).  ``_build/executor.json`` describes the last
build that executed chapters: its wall time, the sum of its chapters' times, its workers.

:func:`report` turns these into the appendix's table and its caption.  A total is given only of
the measured chapters and says so; a time for the whole book is given only when no chapter is
missing: the build's wall time where the last build executed every chapter (a build with several
workers takes less than the sum of its chapters), else the sum.
"""
from __future__ import annotations

__all__ = ["report"]


def _chapters(timings) -> tuple[dict, list]:
    if not isinstance(timings, dict) or not isinstance(timings.get("chapters"), dict) \
            or not isinstance(timings.get("missing", []), list):
        raise ValueError("timings must be the executor's record {'chapters': {name: {'seconds': ...}}, "
                         f"'missing': [names]}}, got {str(timings)[:120]!r}")
    chapters = timings["chapters"]
    for name, r in chapters.items():
        s = r.get("seconds") if isinstance(r, dict) else None
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not s >= 0:
            raise ValueError(f"timings: chapter {name!r} has no wall time ≥ 0 in seconds, got {r!r}")
    return chapters, list(timings.get("missing", []))


def report(timings: dict, executor: dict | None = None):
    """``(header, rows, caption)`` of the build-time table: one row a measured chapter (name,
    seconds, scale, workers, when), a total row of the measured chapters, and a caption that
    names the missing chapters, or else gives the time of the whole book.

    ``executor`` is the last build's record (``_build/executor.json``) or None."""
    chapters, missing = _chapters(timings)
    if not chapters:
        raise ValueError("timings: no chapter has been measured yet; execute the chapters first (make book)")
    total = sum(r["seconds"] for r in chapters.values())
    rows = [[name, f"{r['seconds']:.1f}", str(r.get("scale", "book")), str(r.get("workers", 1)),
             str(r.get("measured", "not recorded"))] for name, r in sorted(chapters.items())]
    measured = f"{len(chapters)} measured chapter" + ("s" if len(chapters) != 1 else "")
    label = "**all chapters**" if not missing else f"**the {measured}**"
    rows.append([label, f"**{total:.1f}**", "", "", ""])
    machines = sorted({str(r.get("machine", "not recorded")) for r in chapters.values()})
    caption = ["Measured on: " + "; ".join(machines) + "."]
    if missing:
        caption.append(f"Not measured: {', '.join(missing)} (no execution record: never executed here, or "
                       f"failed). The total covers the {measured} only, so this page "
                       "gives no time for the whole book.")
        return ["chapter", "wall time (s)", "scale", "workers", "measured"], rows, " ".join(caption)
    whole = executor is not None and set(executor.get("executed", [])) >= set(chapters)
    if whole:
        wall = float(executor["wall_seconds"])
        caption.append(
            f"The last build that executed every chapter ({executor.get('finished', 'date not recorded')}, "
            f"{executor.get('workers', 1)} at once) executed them in {wall / 60:.1f} minutes of wall time; "
            f"its chapters' times sum to {executor['chapter_seconds'] / wall:.2f} times its wall time.")
    else:
        caption.append(f"Executed one after another, the chapters take {total / 60:.1f} minutes.")
    return ["chapter", "wall time (s)", "scale", "workers", "measured"], rows, " ".join(caption)
