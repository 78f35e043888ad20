"""The measurements page's bench figures come from the committed ``nox -s bench`` reports, not
from a hand: the page as the docs hook renders it holds every figure of every report, with its
ratio, and a changed report changes the page.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patcher.bench_report import (
    PAGE_MARKER,
    REPORT_GLOB,
    REPORTS_FOLDER,
    Figure,
    Recorder,
    committed_reports,
    ratio_text,
    read_report,
    value_text,
    with_bench_reports,
    write_report,
)
from patcher.errors import PatcherError

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "measurements.md"


def rows_of(page: str, figure: Figure) -> list[str]:
    """The page's table rows that name ``figure`` with its value."""
    return [
        line
        for line in page.splitlines()
        if line.startswith("| ")
        and f" {figure.what}" in line
        and f"| {value_text(figure.value, figure.unit)} |" in line
    ]


def test_the_page_shows_every_figure_of_every_committed_report() -> None:
    reports = committed_reports(ROOT / REPORTS_FOLDER)
    assert reports, f"no report in {REPORTS_FOLDER}: run nox -s bench and commit its report"
    text = PAGE.read_text()
    assert PAGE_MARKER in text
    page = with_bench_reports(text, ROOT)
    assert PAGE_MARKER not in page
    for path, report in reports:
        heading = f"### {report.date.replace('T', ' ').removesuffix('Z')} UTC\n"
        assert page.count(heading) == 1
        section = page.split(heading)[1].split("\n### ")[0]  # to the next report's heading
        assert str(path.relative_to(ROOT)) in section
        for part in report.parts:
            for figure in part.figures:
                (row,) = rows_of(section, figure)
                assert f"| {ratio_text(figure.ratio)} |" in row
                assert f"| {part.name} ({part.seconds:.0f} s) | {part.vllm} |" in row


def test_a_committed_report_keeps_the_ratio_of_its_raw_figures() -> None:
    """The JSON's ratio (for readers of the file) is the value over the same run's baseline."""
    for path in (ROOT / REPORTS_FOLDER).glob(REPORT_GLOB):
        data = json.loads(path.read_text())
        assert data["machine"]["cores"] > 0 and data["machine"]["cpu"]
        assert len(data["load_before"]) == len(data["load_after"]) == 3
        for part in data["parts"]:
            assert part["load_before"] and part["load_after"]
            for figure in part["figures"]:
                if figure["baseline_value"]:
                    assert figure["ratio"] == figure["value"] / figure["baseline_value"]
                else:
                    assert figure["ratio"] is None


def one_report(folder: Path, value: float) -> Path:
    recorder = Recorder(["python -m patcher.cli.bench", "--skip", "matrix"])
    with recorder.part("codemods", "vllm 0.16.0"):
        recorder.add(Figure("all codemods on 0.16.0", value, "s", "one parse", 0.5, "< 1 s"))
    return write_report(recorder.finish(), folder)


def test_a_changed_report_changes_the_page(tmp_path) -> None:
    """Before/after: the page follows the report; no figure of it is kept in the page itself."""
    (tmp_path / REPORTS_FOLDER).mkdir(parents=True)
    path = one_report(tmp_path / REPORTS_FOLDER, 0.25)
    before = with_bench_reports(PAGE.read_text(), tmp_path)
    assert "| 250 ms | one parse 500 ms | 0.5x | < 1 s |" in before
    data = json.loads(path.read_text())
    data["parts"][0]["figures"][0]["value"] = 2.0
    path.write_text(json.dumps(data))
    after = with_bench_reports(PAGE.read_text(), tmp_path)
    assert "| 2.00 s | one parse 500 ms | 4x | < 1 s |" in after
    assert "250 ms" not in after


def test_a_report_is_written_whole_and_reads_back(tmp_path) -> None:
    path = one_report(tmp_path, 0.25)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no .part left beside it
    report = read_report(path)
    assert report.parts[0].figures == [
        Figure("all codemods on 0.16.0", 0.25, "s", "one parse", 0.5, "< 1 s")
    ]
    assert report.machine.cores == os.cpu_count()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{", "Expecting"),
        ('{"schema": 2}', "schema 2, not 1"),
        ('{"schema": 1, "parts": []}', "'machine'"),
        ("[]", "not a bench report"),
    ],
)
def test_a_bad_report_is_refused_in_one_line(tmp_path, text, says) -> None:
    folder = tmp_path / REPORTS_FOLDER
    folder.mkdir(parents=True)
    (folder / "bench-20261202T000000Z.json").write_text(text)
    with pytest.raises(PatcherError) as raised:
        with_bench_reports(PAGE_MARKER, tmp_path)
    message = str(raised.value)
    assert "\n" not in message and "bench-20261202T000000Z.json" in message and says in message


def test_a_page_without_the_marker_is_left_as_it_is(tmp_path) -> None:
    assert with_bench_reports("# Verify\n", tmp_path) == "# Verify\n"


def test_the_bench_refuses_an_unknown_part_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "patcher.cli.bench", "--skip", "codemods,nope"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONSAFEPATH": "1"},
        cwd=ROOT.parent,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert "no part nope; the parts: codemods, matrix" in done.stderr.splitlines()[-1]
