"""The gate table: every registered gate by ``(name, phase)``, and the gate modules found.

A gate module registers its gates on import (``@register_gate(spec)``). The modules are found,
not listed: the first read of the table (:func:`registered_gates`, :func:`gates_for`) imports
every module of this package, in name order, and :func:`load_gate_packages` every module of the
gate packages a workspace names (``models.gate_packages``), as ``tools.providers.registry`` finds
provider families. Registration order is the order the loop runs gates of one cost kind in.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from agents.gates.call import GateCall, Verdict
from policies.attempts import GateSpec
from store.errors import ConfigError
from tools.contracts.roles import MODEL_SLOTS

GateCheck = Callable[[GateCall], Awaitable[Verdict]]

BUILT_IN = "agents.gates"
"""The package whose modules hold the paper's gates (and this table)."""


@dataclass(frozen=True)
class Gate:
    """One gate: what the policy knows of it (its spec) and how it judges (its check)."""

    spec: GateSpec
    check: GateCheck


GATES: dict[tuple[str, int], Gate] = {}
"""Every registered gate by ``(name, phase)``, in the order they were registered."""

_LOADED: set[tuple[str, tuple[str, ...]]] = set()  # (package, its path) whose modules were imported
_LOADING = threading.RLock()


def register_gate(spec: GateSpec) -> Callable[[GateCheck], Gate]:
    """Decorator: register ``check`` as the check of gate ``spec`` (one per name and phase).
    ``ConfigError`` when the gate is registered twice, or its spec names a model slot
    (``spec.roles``) that is not declared (``tools.contracts.roles.register_slot`` first)."""

    def register(check: GateCheck) -> Gate:
        key = (spec.name, spec.phase)
        if key in GATES:
            raise ConfigError(f"gate {spec.name!r} of phase {spec.phase!r} is registered twice")
        unknown = [slot for slot in spec.roles if slot not in MODEL_SLOTS]
        if unknown:
            raise ConfigError(
                f"gate {spec.name!r} names undeclared model slot(s) {unknown!r}; the slots are "
                f"{', '.join(MODEL_SLOTS)}"
            )
        gate = GATES[key] = Gate(spec, check)
        return gate

    return register


def load_gate_packages(packages: Iterable[str] = ()) -> None:
    """Import every module of the built-in gates package, then of each of ``packages`` (a
    module name is imported alone), once per package and path: their gates, roles and model
    slots are then registered. ``ConfigError`` when one does not import."""
    with _LOADING:  # a gate module may read the table while it is imported
        for name in (BUILT_IN, *packages):
            _load(name)


def _load(name: str) -> None:
    package = _imported(name)
    path = tuple(getattr(package, "__path__", ()))
    if (name, path) in _LOADED:
        return
    _LOADED.add((name, path))  # first: a module it imports may read the table
    try:
        for info in pkgutil.iter_modules(list(path), f"{name}."):
            _imported(info.name)
    except BaseException:
        _LOADED.discard((name, path))  # what did import stays registered; the rest is tried again
        raise


def _imported(name: str) -> object:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(
            f"gate module {name!r} does not import ({type(exc).__name__}: {exc}); check "
            "models.gate_packages and that the package is on the Python path"
        ) from exc


def registered_gates() -> tuple[GateSpec, ...]:
    """The specs of every registered gate, in registration order (a loop policy's ``gates``):
    the built-in package's, then those of the gate packages loaded so far."""
    load_gate_packages()
    return tuple(gate.spec for gate in GATES.values())


def registered_gate(name: str, phase: int) -> Gate | None:
    """The gate registered as ``(name, phase)``, the built-in package loaded first; None when
    there is none."""
    load_gate_packages()
    return GATES.get((name, phase))


def gates_for(specs: Iterable[GateSpec]) -> dict[tuple[str, int], Gate]:
    """The registered gate of each spec; ``ConfigError`` when one has no check, or its check was
    registered under another spec (the policy and the table must agree)."""
    load_gate_packages()
    found: dict[tuple[str, int], Gate] = {}
    for spec in specs:
        gate = GATES.get((spec.name, spec.phase))
        if gate is None:
            raise ConfigError(
                f"the policy's gate {spec.name!r} (phase {spec.phase!r}) has no registered check; "
                f"the registered gates are {sorted(GATES)!r} (a gate package's are there once "
                "models.gate_packages names it)"
            )
        if gate.spec != spec:
            raise ConfigError(
                f"the policy's gate {spec!r} differs from the registered {gate.spec!r}"
            )
        found[(spec.name, spec.phase)] = gate
    return found
