"""The typed run report (sparkmaxent/report.py): its JSON is the documented
train_report.json (docs/formats.md), made from typed fields; the
convergence verdicts read the typed report."""

from __future__ import annotations

import json

import pytest

from sparkmaxent.backends import LocalBackend
from sparkmaxent.choice.sections import (
    ChosenFit,
    PathPoint,
    PathRefit,
    PathSection,
    PriorPoint,
    RefitSkipped,
    StageChoice,
    StageRefit,
)
from sparkmaxent.config import train_config
from sparkmaxent.kernels.blocks import split_block
from sparkmaxent.plan import ExecutionPlan, Limits
from sparkmaxent.problem import Certificate
from sparkmaxent.report import HeldoutFigures, RunReport
from sparkmaxent.selection.base import RoundRecord, RoundSolve
from sparkmaxent.selection.stops import StopReason, stop
from sparkmaxent.train import budget_warnings, train, unconverged

from .test_train import multiclass_problem

#: the keys every run report has (docs/formats.md, "Other outputs")
DOCUMENTED = {
    "method",
    "objective",
    "nonzero_weights",
    "candidate_features",
    "passes",
    "wall_s",
    "unconverged",
    "warnings",
}

FAILED_KKT = Certificate(
    passed=False,
    violation=0.4,
    tol=1e-6,
    l1=0.1,
    bound=0.1,
    nonzero_weights=3,
    features_checked=10,
    max_active_violation=1e-9,
    max_zero_gradient=0.5,
    max_bias_gradient=0.0,
    zero_weights_over_bound=1,
    finite=True,
)


def report(fit: dict, **fields) -> RunReport:
    base = dict(method="grafting", nonzero_weights=3, candidate_features=10, passes=7, wall_s=1.5)
    return RunReport(fit=fit, **{**base, **fields})


def test_json_holds_the_run_fields_over_the_method_section():
    rep = report(
        {"objective": 0.25, "rounds": [{"round": 1}], "trace": [], "folds": {"k": 3}},
        stop=stop(StopReason.MAX_ROUNDS, limit=2),
        heldout=HeldoutFigures(0.75, 0.5),
        automatic_folds={"automatic": True, "events": 90},
        plan=ExecutionPlan(Limits(100), "spark", 2),
    )
    rep.plan.backend_for("train", 1000)
    doc = rep.to_json()
    assert DOCUMENTED <= set(doc)
    assert doc["stopped"] == "max_rounds = 2" and doc["stop_reason"] == "max_rounds"
    assert (doc["heldout_accuracy"], doc["heldout_loss"]) == (0.75, 0.5)
    assert doc["folds"] == {"k": 3, "automatic": True, "events": 90}
    assert doc["plan"] == {"train": {"engine": "spark", "backend": "spark", "partitions": 2}}
    assert rep.fit["folds"] == {"k": 3}, "the method's section is not changed"
    # a model's metadata keeps no per-round rows
    kept = rep.to_json(rounds=False)
    assert "rounds" not in kept and "trace" not in kept and kept["objective"] == 0.25
    # read as a mapping it is its JSON form, and it is JSON-able
    assert dict(rep) == doc and rep["passes"] == 7 and "heldout_accuracy" in rep
    assert json.loads(json.dumps(doc)) == doc


def test_no_stop_no_heldout_no_plan_leave_their_keys_out():
    doc = report({"objective": 1.0, "converged": True}).to_json()
    assert not {"stopped", "stop_reason", "heldout_accuracy", "plan"} & set(doc)


def test_unconverged_reads_the_typed_report():
    assert unconverged(report({"converged": True})) == []
    lbfgs = unconverged(report({"converged": False, "optimizer_message": "ABNORMAL"}))
    assert lbfgs == ["L-BFGS did not converge: ABNORMAL"]
    solve = RoundSolve("newton-cg", 3, 4, 1e-5, 1e-3, False)
    rows = [
        RoundRecord(1, 1, 1, 0, 0.5, "max_gradient", 0.1),
        RoundRecord(2, 2, 1, 0, 0.4, "max_gradient", 0.1, solve=solve),
    ]
    rounds = report({"rounds": rows})
    assert unconverged(rounds) == ["the solver did not converge in round(s) 2"]
    failed = report({"kkt": FAILED_KKT}, stop=stop(StopReason.NO_CANDIDATE_PASSES))
    assert unconverged(failed)[0].startswith("KKT certificate failed: max zero-weight")
    # a run-control cap is the run asked for: its certificate is not held against it
    capped = report({"kkt": FAILED_KKT}, stop=stop(StopReason.MAX_SECONDS, limit=5.0))
    assert unconverged(capped) == []
    assert "the last round" in budget_warnings(capped)[0]
    staged = report(
        {"choice": StageChoice("loglik", 2, -0.5, 3)}, stop=stop(StopReason.MAX_SECONDS, limit=5.0)
    )
    assert "the best held-out stage so far" in budget_warnings(staged)[0]
    assert budget_warnings(failed) == []


def test_refit_reports_the_chosen_fits_heldout_figures():
    held = {"heldout_accuracy": 0.8, "heldout_loss": 0.4, "heldout_score": -0.4, "heldout_se": 0.1}
    chosen = ChosenFit(0.5, 3, held)
    refit = PathRefit("l1", 0.01, 0.45, 4, 12, True, chosen, kkt_passed=True)
    point = PathPoint("l1", 0.01, 3, 0.5, 12, True, None, False, None, held, True, 0.0, True)
    path = PathSection("l1", "loglik", False, [0.01], 0, [point], None)
    rep = report({"objective": 0.45, "path": path, "refit": refit})
    assert rep.refit is refit and rep.refit_heldout == HeldoutFigures(0.8, 0.4)
    assert rep.path is path and rep.path.chosen_point.score == held["heldout_score"]
    assert rep.to_json()["path"]["points"] == [
        {
            "l1": 0.01, "features": 3, "objective": 0.5, "passes": 12, "converged": True,
            "budget": None, "cut": False, "continued_after": None, **held, "kkt_passed": True,
            "below_best_se": 0.0, "chosen": True,
        }
    ]  # fmt: skip
    assert report({"refit": RefitSkipped("why")}).refit_heldout is None
    # its JSON: the penalty by name, the chosen fit's held-out entries flat
    assert rep.to_json()["refit"] == {
        "l1": 0.01,
        "objective": 0.45,
        "features": 4,
        "passes": 12,
        "converged": True,
        "chosen_fit": {"objective": 0.5, "features": 3, **held},
        "kkt_passed": True,
        "kept": "refit",  # which fit the run returns, and why (choice.points.kept_fit)
        "why": "",
    }
    assert report({"refit": RefitSkipped("why")}).to_json()["refit"] == {"skipped": "why"}


def test_a_stage_choice_and_its_refit_are_typed_and_written_as_json():
    choice = StageChoice("loglik", 2, -0.5, 4)
    chosen = ChosenFit(0.6, 3, {"heldout_accuracy": 0.7, "heldout_loss": 0.5}, stage=2)
    refit = StageRefit(0.01, 0.55, 0.5, 0.58, 3, 9, True, 7, 100, chosen)
    rep = report({"choice": choice, "refit": refit})
    assert rep.stage_choice is choice and rep.refit_heldout == HeldoutFigures(0.7, 0.5)
    doc = rep.to_json()
    assert doc["choice"] == {
        "criterion": "loglik",
        "chosen_round": 2,
        "heldout_score": -0.5,
        "stages_run": 4,
    }
    assert list(doc["choice"]) == ["criterion", "chosen_round", "heldout_score", "stages_run"]
    assert list(doc["refit"]) == [
        "l2", "objective", "loss", "start_objective", "features", "passes", "converged",
        "iterations", "max_iter", "chosen_fit", "prior_scale", "prior_points",
    ]  # fmt: skip
    assert doc["refit"]["prior_scale"] == 1.0 and doc["refit"]["prior_points"] == []
    assert list(doc["refit"]["chosen_fit"]) == [
        "stage", "objective", "features", "heldout_accuracy", "heldout_loss",
    ]  # fmt: skip
    assert json.loads(json.dumps(doc)) == doc
    # a refit whose prior was chosen on held-out data lists the scales tried
    point = PriorPoint(0.25, 0.04, 11, True, {"heldout_score": -0.4}, 0.0, True)
    chosen_prior = StageRefit(0.01, 0.55, 0.5, 0.58, 3, 9, True, 7, 100, chosen, 0.25, [point])
    doc = report({"choice": choice, "refit": chosen_prior}).to_json()["refit"]
    assert doc["prior_scale"] == 0.25
    assert doc["prior_points"] == [
        {"scale": 0.25, "l2": 0.04, "passes": 11, "converged": True,
         "heldout": {"heldout_score": -0.4}, "below_best_se": 0.0, "chosen": True},
    ]  # fmt: skip


@pytest.mark.parametrize("method", ["l2", "grafting"])
def test_train_returns_a_typed_report(method):
    block, space = multiclass_problem(3)
    config = train_config(method=method, l2=0.01, plots=False)
    res = train(LocalBackend(split_block(block, 2), space), config)
    rep = res.report
    assert isinstance(rep, RunReport) and rep.method == method
    assert rep.nonzero_weights == res.weights.nnz and rep.candidate_features == space.n_features
    assert rep.objective == rep.fit["objective"] and rep.unconverged == []
    assert (rep.certificate is not None) == (method == "grafting")
    assert (rep.stop is None) == (method == "l2")
    assert DOCUMENTED <= set(rep.to_json())


#: the run's own fields, which the package reads typed (RunReport attributes)
RUN_FIELDS = (
    "method|nonzero_weights|candidate_features|passes|wall_s|stopped|stop_reason|"
    "heldout_accuracy|heldout_loss|unconverged|warnings|plan"
)


def test_the_package_reads_run_reports_typed_not_by_key():
    """No module but report.py reads a run report's own fields by string
    (``report["passes"]``, ``report.get("unconverged")``): they are typed
    attributes, turned into JSON keys only where the report is written."""
    import re
    from pathlib import Path

    import sparkmaxent

    root = Path(sparkmaxent.__file__).parent
    pattern = re.compile(rf"report\w*(\(\))?\s*(\[\s*|\.get\(\s*)[\"']({RUN_FIELDS})[\"']")
    found = [
        f"{p.relative_to(root)}:{n}: {line.strip()}"
        for p in sorted(root.rglob("*.py"))
        if p.name != "report.py"
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not found, found
    # the rule catches what it is for
    assert pattern.search('print(report["passes"])') and pattern.search(
        'reasons = report.get("unconverged") or []'
    )


def test_tests_and_benchmarks_read_a_train_results_report_typed():
    """Unit tests and benchmarks read a train() result's run fields
    (``res.report.passes``, ``res.report.stop``) as attributes, as the
    package does; only the pyspark.ml models' ``report`` (the saved JSON,
    ml/) is a dict (benchmarks/ml_api.py)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    # the run's own fields (a method's FitResult.report, its section, is a dict)
    pattern = re.compile(rf"\.report\s*(\[\s*|\.get\(\s*)[\"']({RUN_FIELDS})[\"']")
    files = [*(root / "tests" / "unit").glob("*.py"), *(root / "benchmarks").glob("*.py")]
    found = [
        f"{p.relative_to(root)}:{n}: {line.strip()}"
        for p in sorted(files)
        if p.name not in ("ml_api.py", "test_report.py")  # the ml dict; the rule's examples
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not found, found
    assert pattern.search('assert res.report["passes"] > 0')
    assert pattern.search('why = res.report.get("stopped")')


#: a typed section's entries read by key: report["path"]["chosen"], .get("refit").get(...)
SECTION_KEY_READ = (
    r"(\[\s*[\"'](path|refit|choice)[\"']\s*\]|\.get\(\s*[\"'](path|refit|choice)[\"']\s*\))"
    r"\s*(\[|\.get\()"
)


def test_the_package_reads_the_typed_sections_by_attribute():
    """The path, refit and stage choice of a method's section are typed
    (choice/sections.py): no module of the package reads their entries by
    key, but ml/ (which reads a saved model's JSON report)."""
    import re
    from pathlib import Path

    import sparkmaxent

    root = Path(sparkmaxent.__file__).parent
    pattern = re.compile(SECTION_KEY_READ)
    found = [
        f"{p.relative_to(root)}:{n}: {line.strip()}"
        for p in sorted(root.rglob("*.py"))
        if p.parent.name != "ml"
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not found, found
    assert pattern.search('measures[chosen.report["path"]["chosen"]]')
    assert pattern.search('rep["refit"]["kkt_passed"] = True')


#: a run report's typed entries (RunReport.rounds, .path, .refit, .stage_choice,
#: .certificate, .objective) by their JSON keys
TYPED_ENTRIES = "rounds|path|refit|choice|kkt|objective"

#: files that read the JSON form on purpose: this file (the JSON's own tests
#: and the rule's examples) and the pyspark.ml client (a model's report is the
#: saved JSON dict)
TYPED_READ_EXEMPT = (
    "tests/unit/test_report.py",
    "tests/spark/connect_ml_client.py",
    "benchmarks/ml_api.py",
)


def typed_key_reads(source: str) -> int:
    """Reads of a report's typed entries by key in ``source``."""
    import re

    pattern = re.compile(rf"\breport\s*(\[\s*|\.get\(\s*)[\"']({TYPED_ENTRIES})[\"']\s*[\]\)]")
    return len(pattern.findall(source))


def test_tests_read_a_train_results_typed_entries_by_attribute():
    """A train() result's rounds, path, refit, stage choice, certificate and
    objective are typed (RunReport): tests and benchmarks read them as
    attributes (``res.report.rounds``, ``.path.chosen_point``,
    ``.certificate.passed``), never by their JSON keys, but the files of
    TYPED_READ_EXEMPT (a JSON file read back is not named ``report``)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    files = [
        *(root / "tests" / "unit").glob("*.py"),
        *(root / "tests" / "spark").glob("*.py"),
        *(root / "benchmarks").glob("*.py"),
    ]
    counts = {str(p.relative_to(root)): typed_key_reads(p.read_text()) for p in sorted(files)}
    found = {f: n for f, n in counts.items() if f not in TYPED_READ_EXEMPT and n}
    assert not found, f"read res.report.rounds / .path / .refit ..., not by key: {found}"
    # the rule catches what it is for, and leaves attribute reads alone
    assert typed_key_reads('x = res.report["rounds"][0]; y = report.get("kkt")') == 2
    assert typed_key_reads('r = fit.report["refit"]["passes"]') == 1
    assert typed_key_reads("x = res.report.rounds; y = res.report.certificate") == 0
    assert typed_key_reads('row["objective"]; report["rounds_run"]') == 0
