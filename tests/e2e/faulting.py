"""Helpers of the fault suite (test_faults.py, test_faults_jobs.py): tiny
prepared data, every training method's small settings, in-process runs
that count the fault points they pass, killed runs, and the checks."""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess
import sys
import zlib

import numpy as np
import pytest

from sparkmaxent import api
from sparkmaxent.config.load import load_config
from sparkmaxent.data.prepare import prepare
from sparkmaxent.model import MaxentModel
from sparkmaxent.storage import faults

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEED = int(os.environ.get("SPARKMAXENT_FAULT_SEED", "0"))
ENV = {"PYTHONPATH": ROOT, "SPARK_LOCAL_IP": "127.0.0.1"}

GRAFT = ["train.grafting.l1=2e-3", "train.grafting.n_best=2"]
#: every method of train.METHODS (and combination grafting), small settings
SETTINGS = {
    "mle": ["train.method=mle"],
    "l2": ["train.method=l2", "train.l2=1e-3"],
    "cutoff": ["train.method=cutoff", "train.cutoff=2"],
    "grafting": ["train.method=grafting", *GRAFT],
    "combination": ["train.method=grafting", *GRAFT, "train.grafting.combination_degree=2"],
    "mle-ifs": ["train.method=mle-ifs", *GRAFT],
    "l2-ifs": ["train.method=l2-ifs", "train.l2=1e-3", *GRAFT],
    "ifs": ["train.method=ifs", "train.selection.max_features=6"],
    "sgc": ["train.method=sgc", "train.selection.max_features=6"],
    "sgc-lookahead": ["train.method=sgc-lookahead", "train.selection.max_features=6"],
    "bayes-factor": [
        "train.method=bayes-factor",
        "train.selection.max_features=6",
        "train.bayes.per_round=1",  # several rounds, so several checkpoints
    ],
    "lattice": ["train.method=lattice", "train.standardize=false"],
}

#: a killed training job: api.fit as the train job runs it, without a Spark session
KILLED_FIT = (
    "import sys\n"
    "from sparkmaxent import api\n"
    "from sparkmaxent.config.load import load_config\n"
    "train, heldout, out, *sets = sys.argv[1:]\n"
    "api.fit(None, load_config(None, sets), train, out, heldout)\n"
)


def write_events(path, seed: int, n: int = 300) -> None:
    """Three labels, each announced by a cue predicate, among 20 noise words."""
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(n):
        y = int(rng.integers(3))
        feats = {f"w{int(k)}" for k in rng.integers(0, 20, size=4)}
        if rng.random() < 0.8:
            feats.add(f"cue{y}")
        lines.append(" ".join([f"L{y}", *sorted(feats)]))
    path.write_text("\n".join(lines) + "\n")


def make_data(spark, tmp):
    """Text files a, b in ``tmp``; ``train`` prepared from a, ``heldout``
    from b with its vocabulary."""
    write_events(tmp / "a.txt", seed=0)
    write_events(tmp / "b.txt", seed=1)
    prepare(spark, [str(tmp / "a.txt")], str(tmp / "train"), "maxent")
    prepare(
        spark,
        [str(tmp / "b.txt")],
        str(tmp / "heldout"),
        "maxent",
        vocabulary=str(tmp / "train"),
        merge_duplicates=False,
    )
    return tmp


def overrides(name: str, *more: str) -> list[str]:
    return [*SETTINGS[name], "data.in_process_max_events=100000", *more]


def cli_args(data, name: str, out, *more: str) -> list[str]:
    """``train`` options for method ``name`` on ``data`` into ``out``."""
    sets = [a for s in overrides(name, *more) for a in ("--set", s)]
    held = ["--heldout", str(data / "heldout")] if name == "lattice" else []
    return ["--train", str(data / "train"), *held, *sets, "--output", str(out)]


def heldout_for(data, name: str) -> str:
    return str(data / "heldout") if name == "lattice" else ""


def counting(call) -> collections.Counter:
    """Run ``call()`` in this process; how often it reached each fault point."""
    seen: collections.Counter = collections.Counter()
    mp = pytest.MonkeyPatch()
    mp.setattr(faults, "reach", lambda point: seen.update([point]))
    try:
        call()
    finally:
        mp.undo()
    return seen


def fit(data, name: str, out, *more: str, resume: bool = False) -> collections.Counter:
    """Train in this process; returns how often each fault point was reached."""
    cfg = load_config(None, overrides(name, *more))
    return counting(
        lambda: api.fit(None, cfg, str(data / "train"), str(out), heldout_for(data, name), resume)
    )


def seeded(what: str, count: int) -> int:
    """A kill point in 1..count, random but the same for the same ``what``
    and SPARKMAXENT_FAULT_SEED."""
    assert count >= 1, f"{what}: the fault point is never reached"
    rng = np.random.default_rng([SEED, zlib.crc32(what.encode())])
    return int(rng.integers(1, count + 1))


def run_killed(argv: list[str], point: str) -> None:
    """Run ``argv`` with SPARKMAXENT_FAULT=``point``; it must die of SIGKILL there."""
    env = {**os.environ, **ENV, faults.ENV: point}
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == -signal.SIGKILL, (
        f"expected a kill at {point}, got exit {r.returncode}:\n{r.stderr[-3000:]}"
    )
    assert f"at {point.replace(':', ' #')}" in r.stderr


def kill_fit(data, name: str, out, point: str, *more: str) -> None:
    """The training job of :func:`fit`, in a new process killed at ``point``."""
    run_killed(
        [sys.executable, "-c", KILLED_FIT, str(data / "train"), heldout_for(data, name), str(out)]
        + overrides(name, *more),
        point,
    )


def model_of(out) -> MaxentModel:
    return MaxentModel.load(str(out / "model"))


def assert_same_model(a: MaxentModel, b: MaxentModel, bias_atol: float = 1e-9) -> None:
    """The same features, weights to 1e-9, labels and bias (to ``bias_atol``)."""
    assert a.weights.ids.tolist() == b.weights.ids.tolist()
    np.testing.assert_allclose(a.weights.values, b.weights.values, rtol=0, atol=1e-9)
    if a.weights.bias is not None or b.weights.bias is not None:
        np.testing.assert_allclose(a.weights.bias, b.weights.bias, rtol=0, atol=bias_atol)
    assert a.labels == b.labels


LEFTOVER = re.compile(r"^\..+\.(tmp|old)-[0-9a-f]{8}(-work)?$|^\..+\.lock$")


def leftovers(directory) -> list[str]:
    """Temporaries, set-aside outputs and locks anywhere under ``directory``
    and beside it."""
    found = [os.path.join(directory.parent, n) for n in os.listdir(directory.parent)]
    for parent, dirs, files in os.walk(directory):
        found += [os.path.join(parent, n) for n in dirs + files]
    return sorted(p for p in found if LEFTOVER.match(os.path.basename(p)))


def dataset_identity(directory) -> dict:
    """What identifies a prepared dataset's content (dataset.json's counts
    and the fingerprints of its events and vocabulary)."""
    info = json.load(open(directory / "dataset.json"))
    keys = ("n_events", "total_weight", "events_fingerprint", "vocabulary_fingerprint", "labels")
    return {k: info.get(k) for k in keys}
