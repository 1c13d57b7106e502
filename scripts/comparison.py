#!/usr/bin/env python3
"""Writes the Comparison table of BENCHMARKS.md from the numbers the benchmarks wrote
into their own sections (between their `<!-- name:start -->` and `<!-- name:end -->`
markers), so that the table is never typed by hand.

    comparison.py [BENCHMARKS.md]

Columns are found by their headers, rows by their first cell, so a section may add
columns or rows. A number a section does not hold (not measured yet) reads "—" and its
target "not measured".
"""
import re
import sys

TARGETS = {
    "python": 10.0,   # × a Python Lambda, per CPU second
    "floor": 70.0,    # % of the Parquet encoder alone
    "rss": 256.0,     # MiB, peak, 1 GiB segment
    "history": 1.5,   # commit time, 10,000 vs 10 prior commits
    "compaction": 70.0,  # % of the Parquet reader + writer alone
    "deletes": 60.0,  # % of the same, applying 10% position deletes
    "latency": 10.0,  # s, upload → snapshot, locally
    "cost": 0.001,    # USD per GiB, materialize + compact + commit
}


def section(text, name):
    match = re.search(rf"<!-- {name}:start -->(.*?)<!-- {name}:end -->", text, re.S)
    return match.group(1) if match else ""


def tables(body):
    """Every markdown table of `body`: a list of rows, each a dict header → cell."""
    out, lines = [], body.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and re.match(r"^\|[-| ]+\|$", lines[i + 1]):
            header = [c.strip() for c in lines[i].strip("|").split("|")]
            rows, i = [], i + 2
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.strip() for c in lines[i].strip("|").split("|")]
                rows.append(dict(zip(header, cells)))
                i += 1
            out.append(rows)
        else:
            i += 1
    return out


def cell(row, *words, avoid=()):
    """The cell whose header holds every one of `words` and none of `avoid`."""
    for header, value in (row or {}).items():
        h = header.lower()
        if all(w in h for w in words) and not any(a in h for a in avoid):
            return value
    return None


def number(value):
    match = re.search(r"-?\d[\d,]*\.?\d*", (value or "").replace("*", ""))
    return float(match.group(0).replace(",", "")) if match else None


def stands(value, target, at_least=True):
    if value is None:
        return "not measured"
    return "met" if (value >= target if at_least else value <= target) else "**missed**"


def fmt(value, unit="", digits=1):
    return "—" if value is None else f"{value:.{digits}f}{unit}"


def usd(value, digits):
    return "—" if value is None else f"${value:.{digits}f}"


def convert_rows(body, *words):
    """Per format: the first row of the convert tables whose input starts with its name
    (of the table with a header holding all `words`, when given)."""
    rows = [r for t in tables(body) for r in t if "input" in r and (not words or cell(r, *words) is not None)]
    formats = [("Avro", "Avro"), ("Protobuf", "Protobuf"), ("JSON", "JSON"), ("raw", "raw"),
               ("raw, a segment that fits a fresh file", "raw key/value (JSON text), zstd batches, a ")]
    out = []
    for label, prefix in formats:
        row = next((r for r in rows if r["input"].startswith(prefix)), None)
        if row:
            out.append((label, row))
    return out


def format_lines(body):
    lines = []
    link = "[Segment → Parquet](#segment--parquet)"
    for label, row in convert_rows(body):
        floe = number(cell(row, "pipeline", "per cpu", avoid=("/",))) or number(cell(row, "pipeline mib/s"))
        python = number(cell(row, "python", "per cpu", avoid=("/",))) or number(cell(row, "python lambda mib/s"))
        ratio = number(cell(row, "/ python"))
        per_cpu = cell(row, "pipeline", "per cpu", avoid=("/",)) is not None
        unit = "MiB per CPU second" if per_cpu else "MiB/s, one core"
        lines.append(f"| {label} → Parquet, {unit}: Floe's materializer vs a Python Lambda | {fmt(floe)} | "
                     f"{fmt(python)} | **{fmt(ratio, '×', 0)}** | ≥ 10× | "
                     f"{stands(ratio, TARGETS['python'])} | {link} |")
        floor = number(cell(row, "/ encoder"))
        encoder = number(cell(row, "encoder alone"))
        pipeline = number(cell(row, "pipeline mib/s"))
        lines.append(f"| {label}: the materializer vs the Parquet encoder alone (its floor), MiB/s | "
                     f"{fmt(pipeline)} | {fmt(encoder)} | **{fmt(floor, '%', 0)}** | ≥ 70% | "
                     f"{stands(floor, TARGETS['floor'])} | {link} |")
        floe_rss = cell(row, "pipeline", "peak rss", avoid=("python lambda",))
        python_rss = number(cell(row, "python lambda", "peak rss"))
        if floe_rss is not None:
            lines.append(f"| {label}: peak RSS, Floe's materializer (in brackets: on the Python Lambda's segment) "
                         f"vs a Python Lambda, MiB | {floe_rss} | {fmt(python_rss, '', 0)} | | — | — | {link} |")
        both = dict(convert_rows(body, "floe / python", "compaction")).get(label)
        if both is not None:
            ratio = number(cell(both, "floe / python", "compaction"))
            floe = number(cell(both, "floe materializer + compaction"))
            python = number(cell(both, "python lambda + compaction"))
            lines.append(f"| {label}: materializer + compaction (segment → zstd table), MiB per CPU second: Floe vs "
                         f"a Python Lambda and pyarrow | {fmt(floe)} | {fmt(python)} | **{fmt(ratio, '×', 0)}** | "
                         f"≥ 10× | {stands(ratio, TARGETS['python'])} | {link} |")
    return lines


def measure_row(body, name):
    """The `value` cell of the row whose `measure` starts with `name`."""
    for table in tables(body):
        for row in table:
            if row.get("measure", "").startswith(name):
                return row.get("value")
    return None


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "BENCHMARKS.md"
    text = open(path).read()
    lines = format_lines(section(text, "convert"))

    rss = number(measure_row(section(text, "materializer"), "peak RSS"))
    lines.append(f"| Materializer peak RSS, a 1 GiB segment through the Lambda handler | {fmt(rss, ' MiB', 0)} | "
                 f"| | ≤ 256 MiB | {stands(rss, TARGETS['rss'], at_least=False)} | "
                 "[Materializer](#materializer-1-gib-segment-from-the-s3-emulator) |")

    commit = section(text, "commit")
    ratio = re.search(r"10,000 vs 10: ([\d.]+)×", commit)
    # Iceberg's rows (those with a Delta table beside are the section's own measure).
    times = {r.get("prior commits"): r.get("time per commit")
             for t in tables(commit) for r in t if r.get("formats", "iceberg") == "iceberg"}
    ratio = float(ratio.group(1)) if ratio else None
    lines.append(f"| Commit time after 10,000 commits vs after 10 | {times.get('10000', '—')} | "
                 f"{times.get('10', '—')} | **{fmt(ratio, '×', 2)}** | ≤ 1.5× | "
                 f"{stands(ratio, TARGETS['history'], at_least=False)} | "
                 "[Committer](#committer-time-per-commit-vs-table-history) |")

    compaction = section(text, "compaction")
    floor = number(measure_row(compaction, "compaction / floor"))
    speed = number(measure_row(compaction, "compaction, MiB/s"))
    floor_speed = number(measure_row(compaction, "floor"))
    lines.append(f"| Compaction vs the Parquet reader + writer alone, MiB per CPU second | {fmt(speed)} | "
                 f"{fmt(floor_speed)} | **{fmt(floor, '%', 0)}** | ≥ 70% | "
                 f"{stands(floor, TARGETS['compaction'])} | [Compaction](#compaction) |")

    applying = next((t for t in tables(compaction)
                     if any(r.get("measure", "").startswith("compaction applying deletes") for r in t)), [])

    def value(name):
        return number(next((r.get("value") for r in applying if r.get("measure", "").startswith(name)), None))

    ratio = value("compaction applying deletes / floor")
    lines.append(f"| Compaction applying position deletes of 10% of the rows vs the reader + writer alone, MiB per "
                 f"CPU second | {fmt(value('compaction applying deletes, MiB/s'))} | {fmt(value('floor'))} | "
                 f"**{fmt(ratio, '%', 0)}** | ≥ 60% | {stands(ratio, TARGETS['deletes'])} | [Compaction](#compaction) |")

    cost = section(text, "cost")
    # A quick run (a debug build, small segments) says so in the row.
    size = re.search(r"segments of (\d+) MiB", cost)
    debug = "a debug build, " if "a debug build" in cost else ""
    run = f" ({debug}{size.group(1)} MiB segments)" if size else ""
    latency = re.search(r"median \*\*([\d.]+) s\*\* \(([\d.]+)–([\d.]+) s\)", cost)
    median = float(latency.group(1)) if latency else None
    spread = f" ({latency.group(2)}–{latency.group(3)} s)" if latency else ""
    link = "[Cost per GB](#cost-per-gb-and-end-to-end-latency)"
    lines.append(f"| End-to-end latency, a segment's upload → its snapshot, local stack | "
                 f"{fmt(median, ' s')}{spread}{run} | | | ≤ 10 s | {stands(median, TARGETS['latency'], at_least=False)} | "
                 f"{link} |")
    costs = {r[""]: r["USD per GiB"] for t in tables(cost) for r in t if "" in r and "USD per GiB" in r}
    floe = number(next((v for k, v in costs.items() if k.startswith("Floe, GB-s from CPU")), None))
    floe_wall = number(next((v for k, v in costs.items() if k.startswith("Floe, GB-s from wall")), None))
    firehose = number(next((v for k, v in costs.items() if k.startswith("Amazon Data Firehose")), None))
    msk = [number(v) for k, v in costs.items() if k.startswith("MSK Connect") or k.startswith("the same at")]
    times = f"{firehose / floe:.0f}× less than Firehose" if floe and firehose else ""
    lines.append(f"| Cost per GiB materialized (Lambda Arm + S3, SQS, DynamoDB, Glue requests) | "
                 f"{usd(floe, 4)} ({usd(floe_wall, 4)} with moto's time billed){run} | "
                 f"Firehose {usd(firehose, 3)}; MSK Connect "
                 f"{' – '.join(usd(m, 4) for m in reversed(msk)) or '—'}; Tableflow not cited | "
                 f"{times} | ≤ $0.001 | {stands(floe, TARGETS['cost'], at_least=False)} | {link} |")

    body = ("Every row is read from the sections below by `scripts/comparison.py` (run by "
            "`scripts/bench.sh`), each from its own benchmark's last run.\n\n"
            "| measure | Floe | against | ratio | target | stands | section |\n"
            "|---|---|---|---|---|---|---|\n" + "\n".join(lines) + "\n")
    start, end = "<!-- comparison:start -->", "<!-- comparison:end -->"
    if start in text:
        text = text[:text.index(start)] + f"{start}\n{body}{end}" + text[text.index(end) + len(end):]
    else:
        anchor = text.index("## Targets")
        text = text[:anchor] + f"## Comparison\n\n{start}\n{body}{end}\n\n" + text[anchor:]
    open(path, "w").write(text)
    print(body)


if __name__ == "__main__":
    main()
