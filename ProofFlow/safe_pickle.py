"""Restricted reading of ProofFlow run pickles: never execute code from a pickle file.

A plain ``pickle.load`` imports and calls whatever a file names, so a crafted
file can run ``os.system``. The bundled ProofFlow pickles need exactly four
globals (inspected with ``pickletools``): the pydantic classes
``TheoremCondition``, ``Definition``, ``Lemma`` and ``TheoremStatement`` of
module ``proofflow.proof_graph``, rebuilt with ``NEWOBJ`` + ``BUILD`` from a
state dict ``{__dict__, __pydantic_extra__, __pydantic_fields_set__,
__pydantic_private__}``. Everything else in them is built-in containers and
scalars, which need no global. :class:`ProofFlowUnpickler` maps those four
names to local plain classes that only store the field dict, and refuses every
other global (including pydantic's own classes) with a clear error.
"""

from __future__ import annotations

import os
import pickle
from typing import Any

from simulator.base.errors import UserError

PROOF_GRAPH_MODULE = "proofflow.proof_graph"


class UnsafePickleError(UserError, pickle.UnpicklingError):
    """The pickle references a global that is not one of the allowed ProofFlow classes."""


class ProofItem:
    """Plain stand-in for a ``proofflow.proof_graph`` pydantic model (fields only)."""

    kind = "item"

    def __init__(self) -> None:
        self.fields: dict[str, Any] = {}
        self.fields_set: set[str] | None = None

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], dict):
            state = state[0]  # (dict state, slot state) form
        if not isinstance(state, dict):
            raise UnsafePickleError(
                f"unexpected state of type {type(state).__name__} for {type(self).__name__}"
            )
        fields = state.get("__dict__", state)
        if not isinstance(fields, dict):
            raise UnsafePickleError(f"unexpected field dict for {type(self).__name__}")
        self.fields = dict(fields)
        fs = state.get("__pydantic_fields_set__")
        self.fields_set = set(fs) if isinstance(fs, (set, frozenset, list)) else None

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.fields.get(key, default)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.fields.get('id')!r})"


class TheoremCondition(ProofItem):
    kind = "condition"


class Definition(ProofItem):
    kind = "definition"


class Lemma(ProofItem):
    kind = "lemma"


class TheoremStatement(ProofItem):
    kind = "theorem_statement"


ALLOWED_CLASSES: dict[tuple[str, str], type[ProofItem]] = {
    (PROOF_GRAPH_MODULE, cls.__name__): cls
    for cls in (TheoremCondition, Definition, Lemma, TheoremStatement)
}


class ProofFlowUnpickler(pickle.Unpickler):
    """Unpickler that resolves only the four ProofFlow proof-graph classes."""

    def find_class(self, module: str, name: str) -> Any:
        cls = ALLOWED_CLASSES.get((module, name))
        if cls is None:
            allowed = ", ".join(f"{m}.{n}" for m, n in ALLOWED_CLASSES)
            raise UnsafePickleError(
                f"refusing global {module}.{name}: only {allowed} may appear in a ProofFlow pickle"
            )
        return cls

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError(f"refusing persistent id {pid!r}")


_CORRUPT_ERRORS = (
    pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
    IndexError, KeyError, UnicodeDecodeError, RecursionError,
)


def load_proofflow_pickle(path: str | os.PathLike) -> dict[str, Any]:
    """Read a ProofFlow run pickle safely; the result is ``{proof_items, nl_proof, ...}``."""
    try:
        with open(path, "rb") as fh:
            obj = ProofFlowUnpickler(fh).load()
    except UnsafePickleError as exc:
        raise UnsafePickleError(f"{path}: {exc}") from None
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc}") from None
    except _CORRUPT_ERRORS as exc:  # truncated/corrupt files raise many different types
        raise UserError(
            f"{path}: not a readable ProofFlow pickle ({type(exc).__name__}: {exc})"
        ) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("proof_items"), list):
        raise UserError(f"{path}: expected a dict with a 'proof_items' list")
    for k, item in enumerate(obj["proof_items"]):
        if not isinstance(item, ProofItem):
            kind = type(item).__name__
            raise UserError(f"{path}: proof_items[{k}] is a {kind}, not a proof item")
        if "fields" not in vars(item):  # rebuilt without a state (no BUILD)
            raise UserError(f"{path}: proof_items[{k}] ({type(item).__name__}) has no fields")
    return obj
