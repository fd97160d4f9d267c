"""Published benchmark statistics come from reference implementations — Cohen's kappa and the
Wilson interval from statsmodels, Krippendorff's alpha from ``krippendorff`` — and agree to
1e-9 with the exact-fraction implementation this project had before, on a shared fixture of 80
kappa tables, 80 alpha reliability sets (2–5 annotators, missing values, one to three labels)
and 38 proportions, recorded from that implementation before it was removed
(``tests/fixtures/agreement_reference.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from policies.agreement import AgreementError, cohen_kappa, krippendorff_alpha, wilson_interval

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "agreement_reference.json").read_text())


@pytest.mark.parametrize("case", FIXTURE["kappa"], ids=lambda c: f"n{len(c['a'])}")
def test_cohen_kappa_matches_the_former_implementation(case: dict[str, Any]) -> None:
    assert cohen_kappa(case["a"], case["b"]) == pytest.approx(case["kappa"], abs=1e-9)


@pytest.mark.parametrize("case", FIXTURE["alpha"], ids=lambda c: f"u{len(c['units'])}")
def test_krippendorff_alpha_matches_the_former_implementation(case: dict[str, Any]) -> None:
    if case["alpha"] is None:  # no unit with two labels: undefined, then and now
        with pytest.raises(AgreementError):
            krippendorff_alpha(case["units"])
        return
    assert krippendorff_alpha(case["units"]) == pytest.approx(case["alpha"], abs=1e-9)


@pytest.mark.parametrize("case", FIXTURE["wilson"], ids=lambda c: f"{c['k']}of{c['n']}")
def test_the_wilson_interval_matches_the_former_implementation(case: dict[str, Any]) -> None:
    low, high = wilson_interval(case["k"], case["n"])
    assert (low, high) == pytest.approx((case["low"], case["high"]), abs=1e-12)
