"""scipy's own sparse kernels (``scipy.sparse._sparsetools``, private to
scipy), called from this module only: the row-chunked loss sweep
(``loss.py``) and the curvature's symbolic-free product
(``curvature.py``) use them where ``available()``. Without them (a scipy
that moved or dropped the module) both kernels take scipy's public
products instead, with the same sums (tested: tests/unit/test_kernels.py,
tests/unit/test_curvature.py, with ``private`` set to None)."""

from __future__ import annotations

from types import ModuleType

private: ModuleType | None
try:
    from scipy.sparse import _sparsetools

    private = _sparsetools
except ImportError:  # pragma: no cover - another scipy
    private = None


def available() -> bool:
    """Whether scipy's own kernels can be called."""
    return private is not None


def _tools() -> ModuleType:
    if private is None:
        raise RuntimeError("scipy's sparse kernels are unavailable: check available() first")
    return private


def csr_matvecs(n_row, n_col, n_vecs, indptr, indices, data, x, y) -> None:
    """y += A x, A (n_row, n_col) in CSR arrays, x and y flat row-major."""
    _tools().csr_matvecs(n_row, n_col, n_vecs, indptr, indices, data, x, y)


def csc_matvecs(n_row, n_col, n_vecs, indptr, indices, data, x, y) -> None:
    """y += A x, A (n_row, n_col) in CSC arrays, x and y flat row-major."""
    _tools().csc_matvecs(n_row, n_col, n_vecs, indptr, indices, data, x, y)


def csr_tocsc(n_row, n_col, indptr, indices, data, out_ptr, out_ind, out_data) -> None:
    """A (n_row, n_col) CSR arrays as CSC arrays, into the out buffers."""
    _tools().csr_tocsc(n_row, n_col, indptr, indices, data, out_ptr, out_ind, out_data)


def csr_matmat(n_row, n_col, a_ptr, a_ind, a_data, b_ptr, b_ind, b_data, ptr, ind, data) -> None:
    """The numeric pass of the CSR product A B (n_row, n_col) into buffers
    large enough for its non-zeros (no symbolic pass)."""
    _tools().csr_matmat(n_row, n_col, a_ptr, a_ind, a_data, b_ptr, b_ind, b_data, ptr, ind, data)


def csr_todense(n_row, n_col, indptr, indices, data, out) -> None:
    """out += the CSR matrix, each stored entry added once."""
    _tools().csr_todense(n_row, n_col, indptr, indices, data, out)


__all__ = ["available", "csc_matvecs", "csr_matmat", "csr_matvecs", "csr_todense", "csr_tocsc"]
