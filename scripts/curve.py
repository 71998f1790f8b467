"""The quality curve of docs/results.md: one table and one plot from the cells of a curve run.

A cell is a directory with `model/` (a `memlm train` run: metrics.json, train_config.yaml) and
`memlm eval` outputs in `eval-*/`; each part's figure comes from the evaluation of that part with the
most cases. `scripts/curve_cell.sh` makes a cell. Run:

    python3 scripts/curve.py runs/curve [runs/curve-v1 ...] --plot docs/img/curve.png > table.md
    python3 scripts/curve.py --paired runs/curve/s-r16-1x runs/curve/g-r16-1x   # B - A, same passages
    python3 scripts/curve.py --paired CELL/eval-real-OLD CELL/eval-real-NEW      # one cell, two evaluations
    python3 scripts/curve.py --paired runs/curve/base runs/curve/real12@verify:0.5 # B with its writes gated
    python3 scripts/curve.py --paired runs/curve/base+runs/curve/base-s1 runs/curve/new+runs/curve/new-s1 # seeds
    python3 scripts/curve.py --paired A B --source knowledgenet     # on one real source's passages only
    python3 scripts/curve.py runs/curve --gates verify:0.5,call_min:0.3 --gate-plot docs/img/write_gate.png
    python3 scripts/curve.py runs/curve --auc          # how well each gate signal separates right writes
    python3 scripts/curve.py CELL@verifier:0/k1 CELL@verifier:0/k4 --auc   # of the first run's writes, of four
    python3 scripts/curve.py EVAL_DIR [EVAL_DIR ...] --cost   # seconds per passage turn, p50 / p95
    python3 scripts/curve.py A@verifier:0/k1 A@verifier:0.5/k4 --points   # operating points side by side

A cell evaluated on real text more than once (at two commits, say) reports the evaluation named by
`--real NAME` where it has one, else its newest with the most passages.

The table gives every figure with its sample size (real text: with a 95% bootstrap interval over the
passages); the plot puts real-text pair F1, false writes and synthetic exact calls against training
records, one line per base x method x data (the --data directory's name).

The write gate (memory_runtime/generation/write_gate.py): an evaluation run with
`generation.write_gate.score=true` keeps
every write the model made with its scores, so `CELL@SIGNAL:T` is the cell as if only writes scoring
at least T had been stored (exactly what the gate stores: a held-back write changes nothing else of a
one-turn passage). `--gates` adds such rows to the table; `--gate-plot` draws each signal's
precision-recall curve per cell.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

# the gate rows score with eval.metrics: run from anywhere, the repository root is importable
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


REAL_EVAL: str | None = None  # --real: the evaluation folder a cell's real-text figures come from, where it has one
SOURCE: str | None = None  # --source: --paired on the passages of the real sources whose name contains it


def _evals(cell: Path, part: str) -> list[tuple[Path, dict]]:
    """The cell's evaluation folders of `part` with that part's figures, the best first: the one named
    by --real (real text), then the most cases, then the newest."""
    found = [
        (d, m["systems"]["memlm"][part])
        for d in cell.glob("eval-*")
        if (m := _load(d / "metrics.json")) is not None and part in m["systems"].get("memlm", {})
    ]

    def rank(item: tuple[Path, dict]) -> tuple:
        d, s = item
        size = s.get("turns") or s.get("questions") or s.get("all", {}).get("passages") or 0
        return (part == "real" and d.name == REAL_EVAL, size, (d / "metrics.json").stat().st_mtime)

    return sorted(found, key=rank, reverse=True)


def _largest(cell: Path, part: str) -> dict | None:
    """This part's figures from the cell's best evaluation of it (see _evals)."""
    best = _evals(cell, part)
    return best[0][1] if best else None


def _pair_counts(cases: list[dict]) -> list:
    """Per-passage true positives, predicted and gold pairs: what pair F1 is summed from."""
    import numpy as np

    return [np.array([c["pairs"][k] for c in cases]) for k in ("tp", "predicted", "gold")]


def _f1(tp, pred, gold, i) -> float:
    """Pair F1 over the passages `i` (a resample: indices may repeat), micro-averaged as memlm eval does."""
    return 2 * tp[i].sum() / max(pred[i].sum() + gold[i].sum(), 1)


def _real_intervals(cell: Path, passages: int) -> dict:
    """95% bootstrap intervals of the cell's real-text evaluation over all `passages` (see _intervals)."""
    cases = _real_cases(cell)
    return _intervals(cases) if len(cases) == passages else {}


def _intervals(cases: list[dict]) -> dict:
    """95% bootstrap intervals (1,000 resamples of the passages) of pair F1 and the false-write rate."""
    import numpy as np

    counts = _pair_counts(cases)
    false = np.array([c["false_write"] for c in cases if not c["has_fact"]], dtype=float)
    rng = np.random.default_rng(0)
    f1s, fws = [], []
    for _ in range(1000):
        f1s.append(_f1(*counts, rng.integers(0, len(cases), len(cases))))
        fws.append(false[rng.integers(0, len(false), len(false))].mean())
    return {"pair_f1_ci": np.percentile(f1s, [2.5, 97.5]), "false_writes_ci": np.percentile(fws, [2.5, 97.5])}


def _gate_of(path: Path) -> tuple[Path, tuple[str, float, int | None] | None]:
    """'CELL@verify:0.5' -> (CELL, ('verify', 0.5, None)); 'CELL@verifier:0.6/k2' keeps the writes of the
    first 2 runs of an evaluation with `propose` (k2); a plain path has no gate."""
    name, _, gate = str(path).partition("@")
    if not gate:
        return path, None
    gate, _, runs = gate.partition("/k")
    signal, _, threshold = gate.partition(":")
    return Path(name), (signal, float(threshold), int(runs) if runs else None)


def gated(case: dict, signal: str, threshold: float, runs: int | None = None) -> dict:
    """A real-text case as if only writes whose `signal` score is at least `threshold` were stored (of the
    first `runs` proposal runs, where given)."""
    from eval.metrics import pair_prf

    if not case.get("gated_writes") and case["writes"]:
        sys.exit(f"case {case['id']}: its writes were not scored (evaluate with generation.write_gate.score=true)")
    proposed = [w for w in case.get("gated_writes", []) if runs is None or w.get("run", 0) < runs]
    kept = [w["triplet"] for w in proposed if w["counted"] and w["scores"][signal] >= threshold]
    return {
        **case,
        "gated_writes": proposed,
        "pairs": pair_prf(kept, case["gold"]).to_dict(),
        "false_write": not case["has_fact"] and bool(kept),
    }


def _real_cases(path: Path) -> list[dict]:
    """The memlm real-text cases, by passage id, of an evaluation folder, or of a cell's best one
    (`CELL@SIGNAL:T`: with its writes gated)."""
    path, gate = _gate_of(path)
    if gate is not None:
        return [gated(c, *gate) for c in _real_cases(path)]
    if (path / "cases.jsonl").is_file():
        folder = path
    elif best := _evals(path, "real"):
        folder = best[0][0]
    else:
        return []
    with (folder / "cases.jsonl").open() as f:
        cases = [c for line in f if (c := json.loads(line))["part"] == "real" and c["system"] == "memlm"]
    if SOURCE is not None:
        cases = [c for c in cases if SOURCE in (c.get("source") or "")]
    return sorted(cases, key=lambda c: c["id"])


def _pooled(spec: Path) -> tuple[list[str], list, object]:
    """'CELL' or 'CELL1+CELL2+...' (the same recipe trained with other seeds): the passage ids, the
    per-passage pair counts summed over the cells, and each passage's false-write rate over them."""
    import numpy as np

    runs = [_real_cases(Path(part)) for part in str(spec).split("+")]
    ids = [c["id"] for c in runs[0]]
    if not ids or any([c["id"] for c in run] != ids for run in runs):
        sys.exit(f"{spec}: its cells were not evaluated on the same real passages")
    counts = [sum(parts) for parts in zip(*(_pair_counts(run) for run in runs))]
    false = np.mean([[c["false_write"] for c in run] for run in runs], axis=0)
    return ids, counts, false


def paired(cell_a: Path, cell_b: Path, resamples: int = 2000) -> str:
    """B minus A in real pair F1 and false writes on the same passages, with 95% paired bootstrap
    intervals: two cells' own intervals overlap long before their difference is noise. A side may
    be several cells joined by '+' (one recipe, several training seeds): their counts are pooled
    per passage, so a passage is resampled with every seed's outcome on it."""
    import numpy as np

    (ids_a, counts_a, fa), (ids_b, counts_b, fb) = _pooled(cell_a), _pooled(cell_b)
    if ids_a != ids_b:
        sys.exit(f"{cell_a} and {cell_b} were not evaluated on the same real passages")
    no_fact = np.array([not c["has_fact"] for c in _real_cases(Path(str(cell_a).split("+")[0]))])

    rng = np.random.default_rng(0)
    everything = np.arange(len(ids_a))
    d_f1, d_fw = [], []
    for _ in range(resamples):
        i = rng.integers(0, len(ids_a), len(ids_a))
        d_f1.append(_f1(*counts_b, i) - _f1(*counts_a, i))
        j = i[no_fact[i]]
        if j.size:  # a resample with no no-fact passage says nothing of false writes
            d_fw.append(fb[j].mean() - fa[j].mean())
    lo, hi = np.percentile(d_f1, [2.5, 97.5])
    fw_lo, fw_hi = 100 * np.percentile(d_fw, [2.5, 97.5])
    d = _f1(*counts_b, everything) - _f1(*counts_a, everything)
    d_false = 100 * (fb[no_fact].mean() - fa[no_fact].mean())
    return (
        f"{_label(cell_b)} - {_label(cell_a)} on {len(ids_a)} passages: "
        f"pair F1 {d:+.3f} (95% {lo:+.3f} to {hi:+.3f}), "
        f"false writes {d_false:+.1f} points (95% {fw_lo:+.1f} to {fw_hi:+.1f}, {no_fact.sum()} passages)"
    )


def points(cells: list[Path]) -> str:
    """One row per cell (`CELL@SIGNAL:T/kN`, seeds joined by '+', pooled): pair precision, recall, F1 and
    false writes, with the number of passages: the operating points of propose + verify side by side."""
    import numpy as np

    rows = ["| cell | pair P | pair R | pair F1 | false writes | passages |", "| --- | --- | --- | --- | --- | --- |"]
    for cell in cells:
        ids, (tp, pred, gold), false = _pooled(cell)
        no_fact = np.array([not c["has_fact"] for c in _real_cases(Path(str(cell).split("+")[0]))])
        precision = tp.sum() / pred.sum() if pred.sum() else float("nan")
        recall = tp.sum() / gold.sum() if gold.sum() else float("nan")
        f1 = _f1(tp, pred, gold, np.arange(len(ids)))
        fw = 100 * false[no_fact].mean() if no_fact.any() else float("nan")
        rows.append(
            f"| {_label(cell)} | {precision:.3f} | {recall:.3f} | {f1:.3f} | {fw:.1f}% ({no_fact.sum()}) | {len(ids)} |"
        )
    return "\n".join(rows)


def _label(path: Path) -> str:
    return " + ".join(f"{p.parent.name}/{p.name}" for p in map(Path, str(path).split("+")))


def gated_row(row: dict, cell: Path, signal: str, threshold: float) -> dict | None:
    """The cell's row with its real-text figures as the gate `signal` >= `threshold` would store."""
    import numpy as np

    cases = [gated(c, signal, threshold) for c in _real_cases(cell)]
    if not cases or not any(c.get("gated_writes") for c in cases):
        return None
    tp, pred, gold = (int(x.sum()) for x in _pair_counts(cases))
    every = np.arange(len(cases))
    no_fact = [c for c in cases if not c["has_fact"]]
    return {
        **row,
        "cell": f"{row['cell']}@{signal}:{threshold}",
        "gate": f"{signal} ≥ {threshold}",
        "pair_f1": _f1(*_pair_counts(cases), every),
        "triplet_f1": None,
        "false_writes": sum(c["false_write"] for c in no_fact) / len(no_fact) if no_fact else None,
        "precision": tp / pred if pred else None,
        "recall": tp / gold if gold else None,
        **_intervals(cases),
    }


def signal_auc(cell: Path, resamples: int = 500) -> str:
    """How well each gate signal tells a right write (its person-organisation pair is gold) from a
    wrong one: the area under the ROC curve over every write the cell made and scored (0.5: chance),
    with a 95% bootstrap interval over passages. `A+B` pools cells (seeds): the same passages' writes
    of each; a signal's difference from `verifier` is paired (the same resampled passages)."""
    import numpy as np

    from eval.metrics import pair_key
    from memory_runtime.stats import roc_auc

    passages: list[list[tuple[bool, dict]]] = []  # per passage (of each pooled cell): (right, scores) per write
    for part in str(cell).split("+"):
        for case in _real_cases(Path(part)):
            gold = {pair_key(g) for g in case["gold"]}
            passages.append(
                [(pair_key(w["triplet"]) in gold, w["scores"]) for w in case.get("gated_writes", []) if w["counted"]]
            )
    signals = sorted({k for p in passages for _, scores in p for k in scores})

    def aucs(chosen) -> dict[str, float | None]:
        writes = [w for i in chosen for w in passages[i]]
        return {
            s: roc_auc(
                [sc[s] for ok, sc in writes if ok and s in sc], [sc[s] for ok, sc in writes if not ok and s in sc]
            )
            for s in signals
        }

    point = aucs(range(len(passages)))
    rng = np.random.default_rng(0)
    draws = [aucs(rng.integers(0, len(passages), len(passages))) for _ in range(resamples)]

    def interval(values) -> str:
        values = [v for v in values if v is not None]
        return f"{np.percentile(values, 2.5):.3f} to {np.percentile(values, 97.5):.3f}" if values else "-"

    parts = [f"{s} {point[s]:.3f} ({interval(d[s] for d in draws)})" for s in signals if point[s] is not None]
    if "verifier" in signals:
        parts += [
            f"verifier - {s} {point['verifier'] - point[s]:+.3f} "
            f"({interval(d['verifier'] - d[s] for d in draws if None not in (d['verifier'], d[s]))})"
            for s in signals
            if s != "verifier" and point[s] is not None and point["verifier"] is not None
        ]
    n_right = sum(ok for p in passages for ok, _ in p)
    n_wrong = sum(not ok for p in passages for ok, _ in p)
    return f"{_label(cell)}: {n_right} right, {n_wrong} wrong writes; AUC " + ", ".join(parts)


def turn_cost(cell: Path) -> str:
    """Seconds per passage turn (all its proposal runs, the gate's scoring included): p50 and p95 over every
    passage, and over the write turns (a passage where a write was proposed)."""
    from memory_runtime.stats import percentile

    cases = [c for part in str(cell).split("+") for c in _real_cases(Path(part))]
    every = [c["wall_s"] for c in cases]
    writing = [c["wall_s"] for c in cases if c.get("gated_writes") or c["writes"]]

    def p(values: list[float]) -> str:
        return f"p50 {percentile(values, 50):.3f} s, p95 {percentile(values, 95):.3f} s" if values else "-"

    return f"{_label(cell)}: {len(every)} turns {p(every)}; {len(writing)} write turns {p(writing)}"


def cell_row(cell: Path) -> dict | None:
    metrics = _load(cell / "model" / "metrics.json")
    config_path = cell / "model" / "train_config.yaml"
    if metrics is None or not config_path.is_file():
        return None
    config = yaml.safe_load(
        "\n".join(line for line in config_path.read_text().splitlines() if not line.startswith("#"))
    )
    optim = config["optim"]
    method = f"full, lr {optim['learning_rate']:.0e}" if config["method"] == "full" else f"LoRA r{config['lora']['r']}"
    if config.get("objective", "sft") != "sft":  # dpo / kto / grpo from a supervised run: the run's own adapter
        method = f"{config['objective'].upper()} from {Path(config['reference']).name}"
    if optim.get("max_tokens_per_step"):
        sys.exit(f"{cell}: token-budget batches have no fixed records per step; the curve counts records")
    per_step = optim["per_device_train_batch_size"] * optim["gradient_accumulation_steps"]
    records_seen = metrics["global_step"] * per_step
    row = {
        "cell": cell.name,
        "base": config["model"]["name"].removeprefix("embedded:"),
        "method": method,
        "data": Path(config["data"]["path"] or "synthetic").name,
        "steps": metrics["global_step"],
        "records": records_seen,
        "per_step": per_step,
        "eval_loss": metrics.get("eval_loss"),
        "train_s": metrics.get("wall_seconds"),
    }
    if records := _largest(cell, "records"):
        row.update(exact=records["calls"]["exact"], turns=records["turns"])
    if episodes := _largest(cell, "episodes"):
        row.update(episode_q=episodes["question_accuracy"], questions=episodes["questions"])
    if real := _largest(cell, "real"):
        a = real["all"]
        row.update(
            pair_f1=a["pair"]["f1"],
            triplet_f1=a["triplet"]["f1"],
            false_writes=a["false_write_rate"],
            passages=a["passages"],
            no_fact=a["no_fact_passages"],
        )
        row.update(_real_intervals(cell, a["passages"]))
    return row


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}%"


def _minutes(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds / 60:.1f} min"


def _loss(x: float | None) -> str:
    return "–" if x is None else f"{x:.4f}"


def _ci(interval, fmt: str, scale: float = 1) -> str:
    return "–" if interval is None else "–".join(fmt.format(scale * x) for x in interval)


def table(rows: list[dict]) -> str:
    head = (
        "| cell | base | method | data | gate | steps × records | train | eval loss | exact calls | episode questions "
        "| real pair F1 | real triplet F1 | false writes |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        triplet = "–" if r.get("triplet_f1") is None else f"{r['triplet_f1']:.3f}"
        lines.append(
            f"| {r['cell'].partition('@')[0]} | {r['base']} | {r['method']} | {r['data']} | {r.get('gate', 'off')} "
            f"| {r['steps']} × {r['per_step']} = {r['records']:,} "
            f"| {_minutes(r.get('train_s'))} | {_loss(r['eval_loss'])} "
            f"| {_pct(r.get('exact'))} ({r.get('turns', '–')} turns) "
            f"| {_pct(r.get('episode_q'))} ({r.get('questions', '–')} questions) "
            f"| {r.get('pair_f1', float('nan')):.3f} ({_ci(r.get('pair_f1_ci'), '{:.2f}')}) "
            f"| {triplet} "
            f"| {_pct(r.get('false_writes'))} ({_ci(r.get('false_writes_ci'), '{:.0f}', 100)}%, "
            f"{r.get('no_fact', '–')} passages) |"
        )
    return "\n".join(lines)


def plot(rows: list[dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    series: dict[str, list[dict]] = {}
    for r in rows:
        series.setdefault(f"{r['base']} · {r['method']} · {r['data']}", []).append(r)
    for label, points in sorted(series.items()):
        points.sort(key=lambda r: r["records"])
        x = [r["records"] for r in points]
        for ax, key in zip(axes, ("pair_f1", "false_writes", "exact")):
            y = [r.get(key) for r in points]
            ax.plot(x, y, marker="o", label=label)
    targets = {"pair_f1": 0.5, "false_writes": 0.10, "exact": 0.98}
    passages = max((r.get("passages", 0), r.get("no_fact", 0)) for r in rows)
    titles = {
        "pair_f1": f"real pair F1 ({passages[0]} passages)",
        "false_writes": f"real false writes ({passages[1]} passages)",
        "exact": "synthetic exact calls",
    }
    for ax, key in zip(axes, ("pair_f1", "false_writes", "exact")):
        ax.axhline(targets[key], color="grey", linestyle="--", linewidth=1)
        ax.set_title(titles[key])
        ax.set_xscale("log")
        ax.set_xlabel("training records (log)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


def gate_plot(cells: list[Path], out: Path) -> None:
    """Each write-gate signal (a column) of each cell (a line): pair precision and the false-write
    rate against pair recall as the threshold rises (the cells' scored evaluations)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scored = [(cell, real) for cell in cells if (real := _largest(cell, "real")) and "write_gate" in real["all"]]
    if not scored:
        sys.exit("no cell has a scored real-text evaluation (generation.write_gate.score=true)")
    signals = sorted({s for _, real in scored for s in real["all"]["write_gate"]})
    fig, axes = plt.subplots(2, len(signals), figsize=(4.2 * len(signals), 7), squeeze=False, sharex=True)
    for cell, real in scored:
        for column, signal in enumerate(signals):
            curve = real["all"]["write_gate"].get(signal)
            if not curve:
                continue
            recall = [p["recall"] for p in curve]
            axes[0][column].plot(recall, [p["precision"] for p in curve], marker=".", label=cell.name)
            axes[1][column].plot(recall, [p["false_write_rate"] for p in curve], marker=".", label=cell.name)
    passages, no_fact = scored[0][1]["all"]["passages"], scored[0][1]["all"]["no_fact_passages"]
    for column, signal in enumerate(signals):
        axes[0][column].set(title=f"gate: {signal}", ylabel="pair precision", ylim=(0, 1))
        axes[1][column].set(xlabel="pair recall", ylabel="false-write rate")
        axes[1][column].axhline(0.10, color="grey", linestyle="--", linewidth=1)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(
        f"writes kept as the threshold rises (right to left): {passages} dev passages, {no_fact} stating no fact"
    )
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("curves", type=Path, nargs="+", help="directories of cells (one per data version, say)")
    parser.add_argument("--plot", type=Path, help="write the plot here (PNG)")
    parser.add_argument(
        "--paired",
        action="store_true",
        help="the two cells (or evaluation folders) given: B minus A on the same passages (paired bootstrap)",
    )
    parser.add_argument("--real", metavar="NAME", help="a cell's real-text figures from its evaluation folder NAME")
    parser.add_argument(
        "--gates", metavar="SIGNAL:T,...", help="add each cell's rows with its writes gated (scored evaluations)"
    )
    parser.add_argument(
        "--source", metavar="NAME", help="--paired on the passages of the real sources whose name contains NAME"
    )
    parser.add_argument("--gate-plot", type=Path, help="write the write gate's precision-recall curves here (PNG)")
    parser.add_argument("--auc", action="store_true", help="each cell's gate signals: AUC, right vs wrong writes")
    parser.add_argument("--points", action="store_true", help="the cells given: pair P / R / F1, false writes")
    parser.add_argument("--cost", action="store_true", help="each evaluation's seconds per turn: p50, p95")
    args = parser.parse_args()
    global REAL_EVAL, SOURCE
    REAL_EVAL, SOURCE = args.real, args.source
    if args.paired:
        if len(args.curves) != 2:
            sys.exit("--paired takes two cells: A B")
        print(paired(*args.curves))
        return
    if args.points:
        print(points(args.curves))
        return
    if args.cost:
        print("\n".join(turn_cost(cell) for cell in args.curves))
        return
    if args.auc:  # cells given (`CELL`, `CELL@SIGNAL:T/kN`, `A+B`), or folders of cells
        given = [c for c in args.curves if "@" in str(c) or "+" in str(c) or _real_cases(c)]
        cells = given or [cell for curve in args.curves for cell in sorted(curve.iterdir()) if cell.is_dir()]
        print("\n".join(signal_auc(cell) for cell in cells if _real_cases(Path(str(cell).split("+")[0]))))
        return
    cells = [cell for curve in args.curves for cell in sorted(curve.iterdir()) if cell.is_dir()]
    rows = [r for cell in cells if (r := cell_row(cell))]
    for gate in filter(None, (args.gates or "").split(",")):
        signal, _, threshold = gate.partition(":")
        rows += [g for cell in cells if (r := cell_row(cell)) and (g := gated_row(r, cell, signal, float(threshold)))]
    if args.gate_plot:
        gate_plot(cells, args.gate_plot)
    if not rows:
        sys.exit(f"no finished cells in {', '.join(map(str, args.curves))}")
    rows.sort(key=lambda r: (r["base"], r["method"], r["data"], r["records"], r.get("gate", "")))
    print(table(rows))
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
