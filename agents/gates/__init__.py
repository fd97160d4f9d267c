"""The gates of DESIGN.md as objects, the verifier that runs them, and how gates are found.

A gate is one :class:`Gate`: its spec (``policies.attempts.GateSpec``: name, phase, cost kind, the
model slots it calls) and its check, an async function of a :class:`GateCall` (what it may use,
as pydantic-ai's ``RunContext``) returning a :class:`Verdict`. :func:`register_gate` puts it in
the table :data:`GATES`, keyed by ``(name, phase)``; the loop policy lists the specs of the gates
a run uses (:func:`registered_gates` gives all of them; the loop runs them cheapest first, by
:func:`policies.attempts.gate_order`) and the :class:`VerifierAgent` finds each one's check in the
table, by name, never as a method.

Gate modules are found, not imported by hand: the first read of the table imports every module
of this package (the paper's gates: :mod:`agents.gates.phase1`, :mod:`agents.gates.phase2`), and
:func:`load_gate_packages` every module of the packages a workspace names in
``models.gate_packages``. A new gate is one module of such a package: its spec and check under
``@register_gate(spec)``, and when it calls a model of its own, that role's ``RoleSpec`` (context,
output, prompt template, offline answer) and ``ModelSlot`` (settings key, default model) declared
with ``tools.contracts.roles.register_role`` / ``register_slot``; its prompt template sits beside
it.

Verdicts are combined as the paper has it: a role call whose answer is unusable (malformed, cut
off, refused) is made again (:data:`VERIFIER_RETRIES`), then its model gives no verdict
(:class:`NoVerdict`); the gates with several verifiers (parametric test, textual
undetectability) decide on those that answered and say so in the event (:func:`unanimous`), and
a gate that no verifier answered does not pass the output (:func:`undecided`).
"""

from __future__ import annotations

from agents.gates.call import (
    VERIFIER_RETRIES,
    Finding,
    GateCall,
    NoVerdict,
    Verdict,
    distractor_set_text,
    noted,
    unanimous,
    undecided,
)
from agents.gates.table import (
    BUILT_IN,
    GATES,
    Gate,
    GateCheck,
    gates_for,
    load_gate_packages,
    register_gate,
    registered_gate,
    registered_gates,
)
from agents.gates.verifier import VerifierAgent

__all__ = [
    "BUILT_IN",
    "GATES",
    "VERIFIER_RETRIES",
    "Finding",
    "Gate",
    "GateCall",
    "GateCheck",
    "NoVerdict",
    "Verdict",
    "VerifierAgent",
    "distractor_set_text",
    "gates_for",
    "load_gate_packages",
    "noted",
    "register_gate",
    "registered_gate",
    "registered_gates",
    "unanimous",
    "undecided",
]
