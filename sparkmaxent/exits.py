"""The command line's exit codes (docs/cli.md), and the one-line message
of a write that failed for want of space or permission."""

from __future__ import annotations

import errno
import re

#: Exit codes, for schedulers.
EXIT_OK = 0
EXIT_FAILED = 1  # an internal error: logged with its traceback
EXIT_BAD_INPUT = 2  # bad input data or paths: the message names the file (and line)
EXIT_BAD_CONFIG = 3  # a bad configuration key, type or value: the message names the key
EXIT_UNCONVERGED = 4  # stopped short of its own criterion; model saved; --allow-unconverged
EXIT_NUMERIC = 5  # a non-finite loss, gradient or objective: no model is saved
EXIT_STALLED = 6  # a pass cancelled: no executors, or spark.pass_timeout_s; --resume
EXIT_NO_SPACE = 7  # a write failed for want of space (ENOSPC, EDQUOT): path and cause named


#: causes of a failed write, as Python's errno and as the JVM's messages say them
_NO_SPACE = {errno.ENOSPC: "No space left on device", errno.EDQUOT: "Disk quota exceeded"}
_DENIED = {
    errno.EACCES: "Permission denied",
    errno.EPERM: "Operation not permitted",
    errno.EROFS: "Read-only file system",
}
_PATH = r"([^\s'\"()]*/[^\s'\"(),]*?)"  # a path: has a slash
_JAVA_PATH = (  # where the messages name the path
    _PATH + r"'? \((?:{causes})\)",  # java.io.FileNotFoundException: /p (Permission denied)
    r"\] (?:{causes}): '" + _PATH + "'",  # a Python OSError's text: [Errno 28] ...: '/p'
    _PATH + r": (?:{causes})",  # the storage layer's OSError: /p: No space left on device
    r"writing rows to " + _PATH + r"\.?(?:\s|$)",  # Spark's TASK_WRITE_FAILED
    r"Mkdirs failed to create " + _PATH + r"(?:\s|$)",
)


def write_failure(exc: BaseException, output: str | None) -> tuple[int, str] | None:
    """(exit code, one-line message) when ``exc`` (or what caused it, a
    Python OSError or a Spark job's Java exception) is a full disk (exit 7)
    or a refused permission (exit 2), naming the path and the cause; else
    None. The path is the one the error names, else the command's output."""

    seen: set[int] = set()
    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        chain.append(e)
        e = e.__cause__ or e.__context__
    for code, causes in ((EXIT_NO_SPACE, _NO_SPACE), (EXIT_BAD_INPUT, _DENIED)):
        for e in chain:
            if isinstance(e, OSError) and e.errno in causes:
                path = e.filename or output or "the output"
                return code, _write_message(code, str(path), causes[e.errno])
        text = "\n".join([str(e) for e in chain] + _java_causes(chain))
        for cause in causes.values():
            if cause not in text:
                continue
            path = None
            for pattern in _JAVA_PATH:
                m = re.search(pattern.format(causes=re.escape(cause)), text)
                if m:
                    path = m.group(1)
                    break
            return code, _write_message(code, path or output or "the output", cause)
    return None


def _java_causes(chain: list[BaseException]) -> list[str]:
    """The messages of the Java exceptions behind pyspark's (its converted
    exceptions hide the JVM's cause chain unless
    spark.sql.pyspark.jvmStacktrace.enabled)."""
    out = []
    for e in chain:
        java = getattr(e, "java_exception", None) or getattr(e, "_origin", None)
        for _ in range(20):  # a cause chain is short; never loop on a cycle
            if java is None:
                break
            try:
                out.append(str(java.toString()))
                java = java.getCause()
            except Exception:  # a dead gateway: what was read is enough
                break
    return out


def _write_message(code: int, path: str, cause: str) -> str:
    what = (
        "free space there (or give an output on another file system) and run again"
        if code == EXIT_NO_SPACE
        else "give an output this user may write, or fix the permissions, and run again"
    )
    return f"cannot write {path}: {cause}; nothing was published: {what}"


def checkpoint_note(command: str, output: str) -> str:
    """What exit 6 adds for a stalled train or pipeline run writing to
    ``output``: its last checkpoint, to continue from with --resume."""
    if command not in ("train", "pipeline"):
        return ""
    from . import storage
    from .selection.checkpoint import STATE_FILE, checkpoint_dir

    directory = checkpoint_dir(output)
    try:
        done = storage.read_json(storage.join(directory, STATE_FILE))["round"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"\nno checkpoint in {directory}: the run starts over"
    return (
        f"\nlast checkpoint: {directory} after round {done}; continue with "
        f"`sparkmaxent {command} --resume` and the same options"
    )
