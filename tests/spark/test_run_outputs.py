"""What prepare, train and predict do with their outputs before the first
pass (issue 23 item 5): a lock against a second run, the sweep of what
killed runs left, and a writability check; on local[2]."""

from __future__ import annotations

import json
import os
import socket

import pytest

from sparkmaxent import api, storage
from sparkmaxent.config import load_config
from sparkmaxent.data.prepare import prepare
from sparkmaxent.errors import InputError
from sparkmaxent.model import MaxentModel

TEXT = "".join(f"{'A' if i % 3 else 'B'} x{i % 5} y{i % 7} z{i % 2}\n" for i in range(60))


@pytest.fixture(scope="module")
def train_dir(spark, tmp_path_factory):
    d = tmp_path_factory.mktemp("outputs")
    (d / "train.txt").write_text(TEXT)
    out = str(d / "train")
    prepare(spark, [str(d / "train.txt")], out, "maxent", partitions=2)
    return out


def cfg(*sets: str):
    return load_config(None, ["train.method='l2'", "train.l2=0.01", *sets])


def foreign_lock(path, host="elsewhere", pid=4242):
    path.write_text(json.dumps({"host": host, "pid": pid, "started": "2026-01-01T00:00:00Z"}))


def test_train_refuses_an_output_another_run_holds_before_training(
    spark, train_dir, tmp_path, monkeypatch
):
    trained = []
    monkeypatch.setattr(api, "train_model", lambda *a, **k: trained.append(a))
    foreign_lock(tmp_path / ".run.lock")
    with pytest.raises(InputError) as e:
        api.fit(spark, cfg(), train_dir, str(tmp_path / "run"))
    assert f"output {tmp_path}/run is being written by another run" in str(e.value)
    assert "pid 4242 on elsewhere" in str(e.value) and not trained
    assert (tmp_path / ".run.lock").exists()  # someone else's: left alone


def test_train_finds_an_unwritable_output_before_training(spark, train_dir, tmp_path, monkeypatch):
    trained = []
    monkeypatch.setattr(api, "train_model", lambda *a, **k: trained.append(a))
    (tmp_path / "blocked").write_text("a file where the output directory should go")
    with pytest.raises(InputError, match=f"output {tmp_path}/blocked/run is not writable"):
        api.fit(spark, cfg(), train_dir, str(tmp_path / "blocked" / "run"))
    assert not trained


def test_train_refuses_an_existing_model_without_overwrite_before_training(
    spark, train_dir, tmp_path, monkeypatch
):
    (tmp_path / "run" / "model").mkdir(parents=True)
    trained = []
    monkeypatch.setattr(api, "train_model", lambda *a, **k: trained.append(a))
    with pytest.raises(InputError, match="model output .*/run/model exists"):
        api.fit(spark, cfg("output.overwrite=false"), train_dir, str(tmp_path / "run"))
    assert not trained


def test_train_sweeps_what_a_killed_run_left_and_releases_its_lock(
    spark, train_dir, tmp_path, monkeypatch
):
    run = tmp_path / "run"
    api.fit(spark, cfg(), train_dir, str(run))
    good = MaxentModel.load(str(run / "model"))
    # a kill between publish's renames: the model only in its .old- sibling,
    # plus a half-written new model, report and checkpoint file
    os.rename(run / "model", run / ".model.old-0badc0de")
    (run / ".model.tmp-12345678").mkdir()
    (run / ".train_report.json.tmp-abcdef01").write_text("{")
    (run / "checkpoint").mkdir(exist_ok=True)
    (run / "checkpoint" / ".state.json.tmp-00000001").write_text("{")
    # and a stale lock of a process on this host that is gone
    foreign_lock(tmp_path / ".run.lock", socket.gethostname(), pid=2**22 + 12345)
    restored = []
    real_train_model = api.train_model

    def spy(*a, **k):  # what the output looks like when training starts
        restored.append(sorted(os.listdir(run)))
        return real_train_model(*a, **k)

    monkeypatch.setattr(api, "train_model", spy)
    api.fit(spark, cfg(), train_dir, str(run))
    assert restored == [["checkpoint", "model", "train_report.json"]], restored
    assert not [n for n in os.listdir(run / "checkpoint") if n.startswith(".")]
    assert not (tmp_path / ".run.lock").exists()
    again = MaxentModel.load(str(run / "model"))
    assert again.weights.values.tolist() == good.weights.values.tolist()


def test_prepare_restores_an_output_set_aside_by_a_kill(spark, tmp_path):
    (tmp_path / "t.txt").write_text(TEXT)
    out = tmp_path / "ds"
    prepare(spark, [str(tmp_path / "t.txt")], str(out), "maxent")
    os.rename(out, tmp_path / ".ds.old-0123abcd")  # killed between the renames
    (tmp_path / ".ds.tmp-89abcdef" / "events").mkdir(parents=True)
    with pytest.raises(InputError, match="exists"):  # restored, so not replaced silently
        prepare(spark, [str(tmp_path / "t.txt")], str(out), "maxent")
    assert sorted(os.listdir(tmp_path)) == ["ds", "t.txt"]
    assert json.loads((out / "dataset.json").read_text())["n_events"] > 0


def test_predict_is_locked_and_scratch_goes_beside_the_output(
    spark, train_dir, tmp_path, monkeypatch
):
    api.fit(spark, cfg(), train_dir, str(tmp_path / "run"))
    model_dir = str(tmp_path / "run" / "model")
    model = MaxentModel.load(model_dir)
    (tmp_path / "new.txt").write_text(TEXT)
    foreign_lock(tmp_path / ".preds.lock")
    with pytest.raises(InputError, match="being written by another run"):
        api.predict(
            spark, model, model_dir, str(tmp_path / "new.txt"), str(tmp_path / "preds"), "maxent"
        )
    os.remove(tmp_path / ".preds.lock")
    seen = []
    real = api.prepared_for_model

    def spy(spark_, model_dir_, data, fmt, workdir, *a):
        seen.append(workdir)
        return real(spark_, model_dir_, data, fmt, workdir, *a)

    monkeypatch.setattr(api, "prepared_for_model", spy)
    api.predict(
        spark, model, model_dir, str(tmp_path / "new.txt"), str(tmp_path / "preds"), "maxent"
    )
    scratch = tmp_path / "scratch"
    api.predict(
        spark,
        model,
        model_dir,
        str(tmp_path / "new.txt"),
        str(tmp_path / "preds2"),
        "maxent",
        cfg=cfg(f"output.scratch_dir='{scratch}'"),
    )
    assert seen[0].startswith(f"{tmp_path}/.preds.tmp-") and seen[0].endswith("-work")
    owner = f"{socket.gethostname()}-{os.getpid()}-"
    assert seen[1].startswith(f"{scratch}/sparkmaxent-scratch-{owner}")
    assert sorted(os.listdir(tmp_path)) == ["new.txt", "preds", "preds2", "run", "scratch"]
    assert os.listdir(scratch) == []
    assert storage.read_parquet(str(tmp_path / "preds")).num_rows == 60


def test_evaluate_scratch_without_report_is_local_only():
    from types import SimpleNamespace

    def fake(master):
        return SimpleNamespace(sparkContext=SimpleNamespace(master=master))

    with pytest.raises(InputError, match="needs a scratch directory .* output.scratch_dir"):
        with api.scratch_for(fake("spark://10.0.0.1:7077"), cfg(), None):
            pass
    with api.scratch_for(fake("local[2]"), cfg(), None) as path:
        assert os.path.isdir(path)  # the driver's temporary directory, shared by local executors
    assert not os.path.exists(path)
