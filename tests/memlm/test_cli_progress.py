"""The CLI's two ways of showing a job's progress (memory_runtime/progress.py's Tasks): bars and log lines."""

from rich.progress import Progress

from memlm.cli.common import LineProgress, bar_tasks


def test_line_progress_logs_a_start_each_tenth_and_the_end_whatever_the_steps():
    said: list[str] = []
    advance = LineProgress(said.append)("memlm: records", 100)
    for n in (3, 3, 3, 3, 25, 1, 62):  # steps that straddle tenths, and one that jumps over several
        advance(n)
    assert said[0] == "memlm: records: 100 to go"
    done = [line.split(", ")[0].rsplit(" ", 1)[-1] for line in said[1:]]
    assert done == ["12/100", "37/100", "100/100"]  # one line a step that crossed a tenth, the end once


def test_bar_tasks_opens_a_bar_a_part_and_advances_it_by_n():
    with Progress(disable=True) as bar:
        tasks = bar_tasks(bar)
        records, episodes = tasks("records", 10), tasks("episodes", 4)
        records(3)
        records(7)
        episodes(1)
        assert [(t.description, t.completed, t.total) for t in bar.tasks] == [("records", 10, 10), ("episodes", 1, 4)]
