"""The verifier: the agent that answers ``GateRequested`` by running the policy's gate."""

from __future__ import annotations

from dataclasses import dataclass, field

from agents.bus import Envelope
from agents.gates.call import GateCall, NoVerdict, undecided
from agents.gates.table import Gate, GateCheck, gates_for, registered_gate
from agents.workers import MalformedOutput, RoleAgent, clip_output
from policies.attempts import DEFAULT_GATES, GateSpec
from store.events import Event, GatePassed, GateRejected, GateRequested


@dataclass
class VerifierAgent(RoleAgent):
    """Answers ``GateRequested`` with ``GatePassed`` or ``GateRejected``, for the policy's gates."""

    gates: tuple[GateSpec, ...] = DEFAULT_GATES
    _table: dict[tuple[str, int], Gate] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._table = gates_for(self.gates)

    def checks(self) -> dict[tuple[str, int], GateCheck]:
        """Each gate's check by ``(name, phase)``."""
        return {key: gate.check for key, gate in self._table.items()}

    async def handle(self, envelope: Envelope) -> Event:
        """Run one gate on the seed's current output.

        A gate whose only verifier gives no verdict (:class:`NoVerdict`, after its retries) does
        not pass the output: a pass needs a verifier to vouch for it. It is rejected with a
        reason that says so — that nothing was found wrong with it — so the generator may submit
        it again; the attempt counts, as any rejection, which bounds what a verifier that never
        answers can cost. (The gates with several verifiers decide on those that answered; see
        :func:`agents.gates.phase1.parametric_test`.)"""
        request = envelope.message
        assert isinstance(request, GateRequested)
        key = (request.gate, request.phase)
        # A seed's run may be defined with gates of its own (a fleet worker drives runs of
        # several definitions): its gate's check is the registered one (checked before the run
        # was taken: agents.run_spec.unhonoured).
        gate = self._table.get(key) or registered_gate(*key)
        if gate is None:
            raise ValueError(f"no gate {request.gate!r} in phase {request.phase}")
        seed = envelope.context
        models = seed.models or self.models
        limits = seed.limits or self.limits
        call = GateCall(self.runner, models, limits, seed, request)
        try:
            verdict = await gate.check(call)
        except NoVerdict as exc:
            last = exc.failures[-1].detail if exc.failures else ""
            verdict = undecided(request.gate, [exc.summary], call, last)
        except MalformedOutput as exc:
            # A gate that calls the runner itself (not through ``GateCall.ask``): no retries.
            verdict = undecided(request.gate, [f"{exc.model}: no verdict"], call, exc.detail)
        if verdict.passed:
            return GatePassed(
                phase=request.phase,
                gate=request.gate,
                attempt=request.attempt,
                detail=verdict.reason,
            )
        return GateRejected(
            phase=request.phase,
            gate=request.gate,
            attempt=request.attempt,
            reason=verdict.reason,
            rejected_output=clip_output(verdict.rejected_output),
        )
