"""The report tells a reader first whether the run passed, how many cases each figure rests on,
and where its text came from; its plots label every bar and keep the legend off the bars."""

import json
from pathlib import Path

import pytest

from eval.metrics import wilson_interval
from eval.records import accuracy_figure, answer_f1_figure
from eval.report import TARGETS, measure_targets, small_sample_line, summarise, verdict_lines, write_report

SHAPES = ("write", "read/per", "read/org", "unanswerable")


def record_rows(per_category: int, exact: int, correct: int) -> list[dict]:
    """`per_category` turns of each category; the first `exact` of each have exact calls, the first
    `correct` of each answered category a correct answer."""
    rows = []
    for category in SHAPES:
        for i in range(per_category):
            row = {
                "category": category,
                "calls_exact": i < exact,
                "n_calls": 1,
                "malformed": 0,
                "writes": {"tp": 1, "predicted": 1, "gold": 1},
            }
            if category != "write":
                ok = i < correct
                row.update(
                    answer_correct=ok,
                    answer_exact=ok,
                    answer_f1=1.0 if ok else 0.0,
                    names={"tp": int(ok), "predicted": 1, "gold": 1},
                    unanswerable=category == "unanswerable",
                    abstained=False,
                )
            rows.append(row)
    return rows


def real_rows(source: str, with_fact: int, no_fact: int, tp: int, false_writes: int) -> list[dict]:
    """Passages of one source: `tp` of the `with_fact` passages written right (one gold pair each),
    `false_writes` of the `no_fact` passages written on."""

    def prf(t, p, g):
        return {"tp": t, "predicted": p, "gold": g}

    rows = [
        {
            "source": source,
            "has_fact": True,
            "false_write": False,
            "any_write": False,
            "pairs": prf(int(i < tp), 1, 1),
            "pairs_mentioned": prf(int(i < tp), 1, 1),
            "triplets": prf(int(i < tp), 1, 1),
        }
        for i in range(with_fact)
    ]
    rows += [
        {
            "source": source,
            "has_fact": False,
            "false_write": i < false_writes,
            "any_write": i < false_writes,
            "pairs": prf(0, int(i < false_writes), 0),
            "pairs_mentioned": prf(0, int(i < false_writes), 0),
            "triplets": prf(0, int(i < false_writes), 0),
        }
        for i in range(no_fact)
    ]
    return rows


def episode_rows(n: int) -> list[dict]:
    turn = {"tokens": 10, "wall_s": 0.1}
    return [
        {
            "correct": i % 2 == 0,
            "turns": [
                {**turn, "kind": "statement", "correct": True, "memory_matches": True},
                {**turn, "kind": "question", "correct": i % 2 == 0, "unanswerable": False},
            ],
        }
        for i in range(n)
    ]


def raw_run(per_category: int = 50, exact: int = 50, correct: int = 40, real: bool = True) -> dict:
    raw = {
        "memlm": {
            "uses_memory": True,
            "records": record_rows(per_category, exact, correct),
            "typos": [{"clean_correct": True, "typo_correct": i % 3 > 0} for i in range(per_category)],
            "episodes": episode_rows(per_category),
        },
        "zero_shot": {"uses_memory": False, "records": record_rows(per_category, 0, 0)},
    }
    if real:
        raw["memlm"]["real"] = real_rows("redocred", 40, 20, tp=30, false_writes=0) + real_rows(
            "knowledgenet", 30, 30, tp=10, false_writes=6
        )
    return raw


def status(summary: dict) -> dict[str, str]:
    return {t["target"]: t["status"] for t in measure_targets(summary)}


def test_wilson_interval_of_known_cases():
    # Newcombe (1998), Statistics in Medicine 17:857, example: 81 of 263 -> 0.2553 to 0.3662
    low, high = wilson_interval(81, 263)
    assert low == pytest.approx(0.2553, abs=5e-5) and high == pytest.approx(0.3662, abs=5e-5)
    # nothing right of 10 still leaves up to z²/(n+z²) = 27.8% possible
    assert wilson_interval(0, 10) == (0.0, pytest.approx(3.8415 / 13.8415, abs=1e-4))
    assert wilson_interval(10, 10) == (pytest.approx(0.7225, abs=1e-4), pytest.approx(1.0))


def test_targets_met_not_met_and_not_measured():
    # exact calls 200 of 200 (met); pairs: 40 right of 70 gold, 76 written (F1 0.55: met);
    # false writes on 6 of 50 passages stating no fact (12%: not met)
    # episode questions 25 of 50 and typos 33 of 50 right (both not met)
    summary = summarise(raw_run())
    assert status(summary) == {
        "synthetic exact calls": "met",
        "episode questions": "not met",
        "typo robustness": "not met",
        "real-text pair F1": "met",
        "real-text false-write rate": "not met",
        "injected facts stored": "not measured",
    }
    lines = verdict_lines(summary, {"limit": None})
    assert lines[0] == "Verdict: meets 2 of 5 targets judged; not measured: injected facts stored."
    assert any(
        "false-write rate ≤ 10%: 12.0% (50 passages stating no fact" in line and line.endswith("not met")
        for line in lines
    )

    without_real = summarise(raw_run(exact=49, real=False))  # 196 of 200 exact calls: 98.0%
    for part in ("typos", "episodes"):
        del without_real["memlm"][part]
    assert status(without_real) == {
        "synthetic exact calls": "met",
        "episode questions": "not measured",
        "typo robustness": "not measured",
        "real-text pair F1": "not measured",
        "real-text false-write rate": "not measured",
        "injected facts stored": "not measured",
    }
    assert verdict_lines(without_real)[0] == (
        "Verdict: meets 1 of 1 targets judged; not measured: "
        "episode questions, typo robustness, real-text pair F1, "
        "real-text false-write rate, injected facts stored."
    )

    just_short = summarise(raw_run(exact=48, real=False))  # 192 of 200: 96.0%
    assert status(just_short)["synthetic exact calls"] == "not met"
    assert verdict_lines(just_short)[0].startswith("Verdict: meets 0 of 3 targets judged")

    baselines_only = summarise({"zero_shot": raw_run()["zero_shot"]})
    assert set(status(baselines_only).values()) == {"not measured"}
    assert verdict_lines(baselines_only)[0].startswith("Verdict: no target measured (")


def test_a_smoke_test_judges_no_target_it_has_too_few_cases_for():
    summary = summarise(raw_run(per_category=3, exact=3, correct=3, real=False))  # 12 turns, all exact
    assert status(summary)["synthetic exact calls"] == "too few cases"
    assert verdict_lines(summary)[0] == (
        "Verdict: no target judged; too few cases to judge (< 50): synthetic exact calls, episode questions, "
        "typo robustness; not measured: real-text pair F1, real-text false-write rate, injected facts stored."
    )


def test_every_target_is_listed_once_with_its_threshold():
    assert [t.text() for t in TARGETS] == ["≥ 98%", "≥ 95%", "≥ 90%", "≥ 0.5", "≤ 10%", "≤ 0%"]
    lines = verdict_lines(summarise(raw_run()))
    for target in TARGETS:
        assert sum(line.strip().startswith(f"{target.name} {target.text()}:") for line in lines) == 1


def test_exact_calls_carry_their_wilson_interval():
    summary = summarise(raw_run(exact=49, real=False))
    low, high = summary["memlm"]["records"]["calls"]["exact_interval95"]
    assert (low, high) == wilson_interval(196, 200)
    exact_line = next(line for line in verdict_lines(summary) if "exact calls" in line)
    assert f"95% CI {100 * low:.1f}–{100 * high:.1f}%" in exact_line and "200 turns" in exact_line


def test_a_small_limit_is_called_a_smoke_test():
    summary = summarise(raw_run(per_category=3, exact=3, correct=2, real=False))
    line = small_sample_line(summary, {"limit": 3})
    assert line.startswith("A smoke test of the pipeline, not a measurement: --limit 3")
    assert "a difference of one case is 33.3 points" in line
    assert small_sample_line(summary, {"limit": 3}) in verdict_lines(summary, {"limit": 3})


def test_a_large_sample_gets_no_warning():
    summary = summarise(raw_run(per_category=50))
    assert small_sample_line(summary, {"limit": 50}) is None
    assert not any("smoke test" in line.lower() for line in verdict_lines(summary, {"limit": 50}))


def test_a_small_group_is_flagged_even_without_a_limit():
    raw = raw_run(per_category=50)
    raw["memlm"]["real"] = real_rows("knowledgenet", 30, 4, tp=20, false_writes=1)
    line = small_sample_line(summarise(raw), {"limit": None})
    assert line.startswith("Small sample") and "25.0 points" in line and "knowledgenet passages stating no fact" in line


def test_a_run_records_the_paths_it_read_and_the_cases_per_source(tmp_path, monkeypatch):
    from data_gen.data_config import DataConfig
    from data_gen.generate import generate
    from data_gen.real import default_real_dir
    from eval.eval_config import EvalConfig
    from eval.real_probe import real_path
    from eval.run import describe_sources, load_cases

    generate(
        DataConfig.load(Path(__file__).parents[2] / "configs/data/tiny.yaml"),
        tmp_path / "data",
        overwrite=True,
        show_progress=False,
    )
    real = tmp_path / "kn.jsonl"
    real.write_text(
        json.dumps(
            {
                "text": "Ann Lee is the CEO of Pfizer.",
                "annotated": ["CEO"],
                "triples": [{"person": "Ann Lee", "relation": "CEO of", "organization": "Pfizer"}],
            }
        )
        + "\n"
        + json.dumps({"text": "It rained in Oslo.", "annotated": ["CEO"], "triples": []})
        + "\n"
    )
    config = EvalConfig(
        data=str(tmp_path / "data"),
        real=str(real),
        limit=2,
        parts=["records", "episodes", "real"],
        generation={"model": "x"},
    )
    sources = describe_sources(config, load_cases(config))
    assert sources["records"]["file"] == str((tmp_path / "data/jsonl/test.jsonl").resolve())
    assert sources["episodes"] == {"file": str((tmp_path / "data/jsonl/episodes.jsonl").resolve()), "used": 2}
    assert sources["real"]["path"] == str(real.resolve()) and sources["real"]["chosen_by"] == "--real"
    assert sources["real"]["by_source"] == {"knowledgenet": {"passages": 2, "no_fact": 1}}

    monkeypatch.delenv("MEMLM_REAL_DIR", raising=False)
    assert real_path(EvalConfig(generation={"model": "x"})) == (default_real_dir(), "default")
    monkeypatch.setenv("MEMLM_REAL_DIR", str(tmp_path))
    assert real_path(EvalConfig(generation={"model": "x"})) == (tmp_path, "$MEMLM_REAL_DIR")


def _meta(tmp_path, limit):
    return {
        "model": "runs/x",
        "data": "d",
        "seed": 0,
        "limit": limit,
        "wall_s": 1.0,
        "sources": {
            "records": {"data": str(tmp_path / "d"), "file": str(tmp_path / "d/jsonl/test.jsonl"), "used": 12},
            "real": {
                "path": "/repo/data/real",
                "chosen_by": "default",
                "files": ["/repo/data/real/redocred_dev_person_org.jsonl"],
                "by_source": {
                    "knowledgenet": {"passages": 60, "no_fact": 30},
                    "redocred": {"passages": 60, "no_fact": 20},
                },
            },
        },
    }


def test_report_opens_with_the_verdict_the_sample_and_the_sources(tmp_path):
    raw = raw_run(per_category=3, exact=3, correct=2)
    summary = summarise(raw)
    write_report(summary, raw, _meta(tmp_path, 3), tmp_path / "out")
    report = (tmp_path / "out" / "report.md").read_text()
    top = report.split("## Headline")[0]
    assert "Verdict: meets" in top and "A smoke test of the pipeline" in top
    assert f"`{tmp_path / 'd/jsonl/test.jsonl'}` (12 records used)" in top
    assert (
        "`/repo/data/real` (default): knowledgenet 60 passages, 30 of them stating no fact; "
        "redocred 60 passages, 20 of them stating no fact"
    ) in top
    assert "## Targets" in report and "| synthetic exact calls | ≥ 98% | 100.0% |" in report
    assert "Cases: 12 teacher-forced turns · 3 typo questions · 3 episodes with 3 questions" in report
    assert "real text: redocred 60 passages, 20 of them stating no fact" in report

    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["meta"]["sources"]["real"]["chosen_by"] == "default"
    assert metrics["verdict"].startswith("Verdict: meets")
    assert [t["target"] for t in metrics["targets"]] == [t.name for t in TARGETS]


def test_plots_label_every_bar_and_keep_the_legend_off_the_bars(tmp_path):
    raw = raw_run(per_category=3, exact=3, correct=3)  # memlm answers all (100% bars), zero-shot none (0%)
    summary = summarise(raw)
    fig = accuracy_figure(summary)
    ax = fig.axes[0]
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.texts]
    assert len(labels) == len(ax.patches) == 2 * 3  # two systems, three answered categories
    assert labels == ["100"] * 3 + ["0"] * 3  # a 0% bar reads as measured, not missing
    legend = ax.get_legend().get_window_extent()
    assert not any(legend.overlaps(bar.get_window_extent()) for bar in ax.patches)
    ticks = [t.get_window_extent() for t in ax.get_xticklabels()]
    assert not any(a.overlaps(b) for i, a in enumerate(ticks) for b in ticks[i + 1 :])

    fig = answer_f1_figure(summary)
    assert [t.get_text() for t in fig.axes[0].texts] == ["1.00", "0.00"]

    files = write_report(summary, raw, _meta(tmp_path, 3), tmp_path / "out")
    for name in ("accuracy_by_shape", "answer_f1", "latency_per_turn"):
        assert files[name].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_scored_run_reports_the_write_gate_curve(tmp_path):
    raw = raw_run(per_category=3, exact=3, correct=2)
    raw["memlm"]["real"] = real_rows("knowledgenet", 30, 30, tp=10, false_writes=6)
    summary = summarise(raw)
    curve = [
        {
            "threshold": t,
            "precision": 0.5 + t / 2,
            "recall": 1 - t,
            "f1": 0.5,
            "predicted": 4,
            "false_write_rate": 1 - t,
        }
        for t in (0.0, 0.5, 0.9)
    ]
    summary["memlm"]["real"]["all"]["write_gate"] = {"verify": curve}
    meta = {**_meta(tmp_path, 3), "write_gate": {"signal": "verify", "threshold": 0.5, "score": True}}
    write_report(summary, raw, meta, tmp_path / "out")
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## The write gate" in report and "signal verify, threshold 0.5" in report
    assert "| verify | 0.50 | 0.75 | 0.50 | 0.50 | 50.0% |" in report
