"""The PP-attachment and CoNLL-2000 tasks of benchmarks/combination.py:
the corpora rewritten and prepared under ``--work`` (train, held-out,
test), never copied into the repository."""

from __future__ import annotations

import os

from benchmarks.common import prepare_splits, shared_corpus


def pp_text(
    src: str, dst: str, bits: dict[str, str], lengths: list[int], end: str = "prefix"
) -> None:
    """A PP-attachment file as ``maxent`` lines: label, then the slot-tagged
    head words (and their bit-string prefixes or suffixes, ``end``)."""
    with open(src) as f, open(dst, "w") as out:
        for line in f:
            cols = line.split()
            if len(cols) != 6:
                continue
            feats = []
            for slot, word in zip(("v", "n1", "p", "n2"), cols[1:5]):
                # "10:45" would read as feature "10" with value 45 in the maxent format
                feats.append(f"{slot}={word.lower().replace(':', '_')}")
                code = bits.get(word) or bits.get(word.lower())
                if end == "suffix" and code and "1" in code:
                    feats += [f"{slot}s{n}={code[-n:]}" for n in lengths]
                elif end == "prefix" and code:
                    feats += [f"{slot}b{n}={code[:n]}" for n in lengths]
            out.write(f"{cols[5]} {' '.join(feats)}\n")


def read_bitstrings(path: str) -> dict[str, str]:
    out = {}
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 2:
                out[parts[0]] = parts[1]
    return out


def prepare_pp(
    work: str, data_dir: str, lengths: list[int], reuse: bool, end: str = "prefix"
) -> dict[str, str]:
    dirs = {name: os.path.join(work, name) for name in ("train", "dev", "test")}
    if reuse and all(os.path.exists(os.path.join(d, "dataset.json")) for d in dirs.values()):
        return dirs
    from sparkmaxent.backends.session import spark_session

    bits = (
        read_bitstrings(shared_corpus("ppattach", "bitstrings", data_dir=data_dir))
        if lengths
        else {}
    )
    os.makedirs(os.path.join(work, "text"), exist_ok=True)
    texts = {}
    for name, src in (("train", "training"), ("dev", "devset"), ("test", "test")):
        texts[name] = os.path.join(work, "text", name + ".txt")
        pp_text(shared_corpus("ppattach", src, data_dir=data_dir), texts[name], bits, lengths, end)
    spark = spark_session("local[2]", "combination-prepare", {"spark.driver.memory": "2g"})
    try:
        inputs = {name: [path] for name, path in texts.items()}
        prepare_splits(spark, inputs, dirs, "maxent", train_only={"partitions": 2})
    finally:
        spark.stop()
    return dirs


def prepare_conll(
    work: str, data_dir: str, reuse: bool, sentences: int = 0, templates: str = "unigrams"
) -> dict[str, str]:
    """CoNLL-2000 with the 10 unigram templates (conll option
    templates=unigrams; ``"chunk"``: the 17 hand-written ones), count cutoff
    2: the first 90% of train.txt's sentences to train (only the first
    ``sentences`` of them when > 0), the rest held out, test.txt to report.
    Up to 100,000 events a file is prepared in-process (no Spark jobs)."""
    from benchmarks.conll2000_baselines import split_sentences

    dirs = {name: os.path.join(work, name) for name in ("train", "dev", "test")}
    if reuse and all(os.path.exists(os.path.join(d, "dataset.json")) for d in dirs.values()):
        return dirs
    from sparkmaxent.backends.session import spark_session

    os.makedirs(work, exist_ok=True)
    fit, dev = os.path.join(work, "fit.txt"), os.path.join(work, "dev.txt")
    split_sentences(shared_corpus("conll2000", "train.txt", data_dir=data_dir), fit, dev, 0.1)
    if sentences:
        with open(fit) as f:
            kept = f.read().split("\n\n")[:sentences]
        with open(fit, "w") as f:
            f.write("\n\n".join(kept).strip("\n") + "\n")
    opts = {"templates": templates}
    small = {"in_process_max_events": 100_000}
    spark = spark_session("local[2]", "combination-prepare", {"spark.driver.memory": "4g"})
    try:
        test = shared_corpus("conll2000", "test.txt", data_dir=data_dir)
        inputs = {"train": [fit], "dev": [dev], "test": [test]}
        prepare_splits(
            spark, inputs, dirs, "conll", train_only={"cutoff": 2}, options=opts, **small
        )
    finally:
        spark.stop()
    return dirs
