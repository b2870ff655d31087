"""Learning-rate policies (Rudra Eq 6, §5.2; Zhang Eqs 2–3; DynSGD; Chan & Lane)."""

from psbench.lr.policies import LR_POLICIES, LRPolicy

__all__ = ["LR_POLICIES", "LRPolicy"]
