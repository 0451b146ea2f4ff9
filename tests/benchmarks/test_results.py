"""The result pages: one current run per benchmark, in one format."""

import glob
import json
import os
import tempfile

import pytest

from benchmarks.common import RESULT_KEYS, RESULTS, scratch_paths, target, write_result

PAGES = sorted(glob.glob(os.path.join(RESULTS, "*.json")))


def test_write_result_replaces_the_page_with_the_latest_run(tmp_path):
    path = str(tmp_path / "bench.json")
    write_result(path, [{"a": 1}], {"t": target("a <= 1", 1, True)})
    write_result(path, [{"a": 2}])
    doc = json.loads(open(path).read())
    assert tuple(doc) == RESULT_KEYS
    assert doc["rows"] == [{"a": 2}] and doc["targets"] == {}
    assert doc["benchmark"] == "test_results"  # the calling module's name
    assert doc["commit"] and doc["date"]


def test_a_benchmark_run_as_a_module_names_its_page_by_the_module(tmp_path):
    import types

    path = str(tmp_path / "out.json")
    as_main = {"__name__": "__main__", "__spec__": types.SimpleNamespace(name="benchmarks.demo")}
    exec("write_result(path, [{'a': 1}])", {**as_main, "write_result": write_result, "path": path})
    assert json.loads(open(path).read())["benchmark"] == "demo"


def test_a_target_needs_goal_value_and_met(tmp_path):
    with pytest.raises(ValueError, match="'t' needs exactly goal, value and met"):
        write_result(str(tmp_path / "x.json"), [], {"t": {"goal": "g", "met": True}})


@pytest.mark.parametrize("path", PAGES, ids=os.path.basename)
def test_every_result_file_is_one_current_page(path):
    with open(path) as f:
        doc = json.load(f)
    name = os.path.splitext(os.path.basename(path))[0]
    assert tuple(doc) == RESULT_KEYS
    assert doc["benchmark"] == name
    assert os.path.exists(os.path.join(os.path.dirname(RESULTS), name + ".py"))
    assert doc["commit"] and isinstance(doc["rows"], list) and doc["rows"]
    for entry in doc["targets"].values():
        assert set(entry) == {"goal", "value", "met"} and isinstance(entry["met"], bool)


def test_no_other_files_than_pages_and_their_figures():
    names = {os.path.splitext(os.path.basename(p))[0] for p in PAGES}
    for other in os.listdir(RESULTS):
        stem, ext = os.path.splitext(other)
        assert ext in (".json", ".png"), other
        if ext == ".png":
            assert any(stem == n or stem.startswith(n + "_") for n in names), other


def test_the_benchmarks_page_is_generated_current_and_short():
    """docs/benchmarks.md is what ``python -m benchmarks.report`` writes from
    the result pages, at most 600 lines, and every page has its section."""
    from benchmarks.report import DOC, MAX_LINES, PAGES, render

    text = render()
    with open(DOC) as f:
        assert f.read() == text, "docs/benchmarks.md is stale: run python -m benchmarks.report"
    assert text.count("\n") <= MAX_LINES == 600
    for name in PAGES:
        assert f"\n## {name}\n" in text


def test_links_into_the_benchmarks_page_name_its_sections():
    """Docs link to a benchmark's section as ``benchmarks.md#<benchmark>``."""
    import re

    from benchmarks.common import ROOT
    from benchmarks.report import PAGES

    docs = glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)
    anchors = {"targets-at-a-glance", *PAGES}
    bad = []
    for path in [*docs, os.path.join(ROOT, "README.md")]:
        with open(path) as f:
            for anchor in re.findall(r"benchmarks\.md#([A-Za-z0-9_-]+)", f.read()):
                if anchor not in anchors:
                    bad.append(f"{os.path.relpath(path, ROOT)}: #{anchor}")
    assert not bad, bad


def test_a_page_names_scratch_paths_as_work(tmp_path):
    scratch = tempfile.gettempdir()
    command = f"python -m benchmarks.x --work {scratch}/w --rows-from {scratch}/a/b.json:newton"
    assert scratch_paths(command) == (
        "python -m benchmarks.x --work $WORK/w --rows-from $WORK/b.json:newton"
    )
    assert scratch_paths("python -m benchmarks.x --rows-from results/a.json") == (
        "python -m benchmarks.x --rows-from results/a.json"
    )
    path = str(tmp_path / "x.json")
    write_result(path, [{"a": 1, "measured_by": command}, {"a": 2}])
    rows = json.loads(open(path).read())["rows"]
    assert rows == [{"a": 1, "measured_by": scratch_paths(command)}, {"a": 2}]


def test_commit_is_the_one_the_run_started_from(tmp_path):
    """A checkout moved during a run (a rebase) does not change the commit
    its rows record: ``common.commit`` is read when the module is imported."""
    import shutil
    import subprocess
    import sys

    from benchmarks import common

    repo = tmp_path / "repo"
    (repo / "benchmarks").mkdir(parents=True)
    shutil.copy(common.__file__, repo / "benchmarks" / "common.py")
    (repo / "benchmarks" / "__init__.py").write_text("")
    who = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env = {**os.environ, **who, "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}

    def git(*args: str) -> str:
        run = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        return run.stdout.strip()

    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "first")
    first = git("rev-parse", "--short", "HEAD")
    script = (
        "import subprocess\n"
        "from benchmarks import common\n"
        "open('moved.txt', 'w').write('x')\n"
        "subprocess.run(['git', 'add', '.'], check=True)\n"
        "subprocess.run(['git', 'commit', '-q', '-m', 'second'], check=True)\n"
        "print(common.commit())\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=repo, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert git("rev-parse", "--short", "HEAD") != first  # the checkout moved
    assert run.stdout.strip() == first
