"""The cost model's section on the timing pages: the ``p775_cluster`` terms, the ONE published number each
was fitted to, and what it predicts for the others (psbench.cluster.fit), so every page says which numbers
are fits and which are predictions."""

from __future__ import annotations

import functools


@functools.cache
def _checks_md() -> str:
    from psbench.cluster.fit import checks, checks_markdown

    return checks_markdown(checks())


TERMS = (
    "- **node_share** (learners sharing a P775 node compute slower; 4 learners per node): fitted on Rudra "
    "Table 2 (σ, μ, λ) = (1, 128, 10) 2,551 s → 4.95 % per extra learner on the node.\n"
    "- **compute** t(μ) = 10.49 ms + 3.1221 ms·μ (CIFAR CNN): t(128) from the (128, 1) baseline 22,392 s (§5.4), "
    "t(4) fitted on Table 2 (1, 4, 30) 1,573 s. The 300 MB models use Table 4's AlexNet fit (54 h/epoch at "
    "(256, 1), §5.5): 0.7516 s + 0.1591 s·μ.\n"
    "- **jitter_cv** (the barrier/straggler term: hardsync waits for the slowest of λ log-normal compute times): "
    "fitted on Table 4's base-hardsync / base-softsync ratio 330 / 270 → 0.0591.\n"
    "- **PS service and apply** (0.14 ms/message, 0.4 GB/s): p775's, fitted on Table 2 (30, 4, 30) 2,073 s.\n"
    "- **link contention** (a push reaching the PS root behind q others moves 1 + β·q times slower; β = 0.7 "
    "fitted on Rudra §3.3's \"16 tasks sending 300 MB to the same receiver ... would take over a second\") is "
    "implemented but off: it predicts Table 1's Rudra-base at 12.7 % (paper 11.52 %) but Rudra-adv at 6.6 % "
    "(56.75 %) and Table 4's adv / adv* at 1,827 / 87,250 min/epoch (212 / 125) — refuted by Tables 1 and 4.\n"
)


def section(page_numbers: str, fitted_here: str = "") -> str:
    """Markdown: the terms and the fit/prediction table; ``page_numbers`` are predictions unless ``fitted_here``
    names the one number of this page a term was fitted to."""
    here = (f"On this page, {fitted_here} is a fit; every other number of {page_numbers} is a prediction."
            if fitted_here else f"No term is fitted on {page_numbers}: the claims on this page are predictions.")
    return ("\n## Cost model: which number each term was fitted to\n\n"
            "Hardware profile `p775_cluster` (src/psbench/conf/hardware/p775_cluster.yaml; "
            "`python -m psbench.cluster.fit` refits and prints this table). Each term is fitted on ONE "
            f"published number. {here}\n\n" + TERMS + "\n" + _checks_md())
