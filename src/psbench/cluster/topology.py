"""Cluster topologies of Rudra §3.2–3.3 (Figs 1–3) as plain data.

* ``rudra_base`` — one PS handling messages one at a time; blocking push and pull;
  a learner first asks for the timestamp and skips the pull when its weights are current.
* ``rudra_adv`` — a PS tree: a leaf PS on every node averages its learners' gradients
  and relays them to the root; learners pull from their leaf, which pulls from the root.
* ``rudra_adv_star`` — the tree plus a weight-broadcast tree over the learners and
  background push/pull threads: a learner never waits for a pull (pointer swap to the
  newest weights it has received) and has at most one push in flight.

Learners fill nodes of ``learners_per_node`` in order, or, with ``nodes`` set, spread over that many nodes as
evenly as possible: Rudra's footnote 4 runs its CIFAR10 λ on η nodes, (λ, η) = (10, 4), (18, 4), (30, 8), i.e.
3,3,2,2 / 5,5,4,4 / 4×6 + 3×2 learners per node.
"""

from __future__ import annotations

from dataclasses import dataclass

from psbench.errors import require

TOPOLOGIES = ("rudra_base", "rudra_adv", "rudra_adv_star")


@dataclass(frozen=True)
class Topology:
    name: str = "rudra_base"
    learners_per_node: int = 4
    broadcast_fanout: int = 2
    leaf_gather: bool = False
    #: spread the learners over this many nodes (at most one node per learner), or None: ``learners_per_node``
    nodes: int | None = None

    def __post_init__(self) -> None:
        require(self.name in TOPOLOGIES, "topology.name", self.name, f"one of {list(TOPOLOGIES)}")
        require(self.learners_per_node >= 1, "topology.learners_per_node", self.learners_per_node, ">= 1")
        require(self.broadcast_fanout >= 1, "topology.broadcast_fanout", self.broadcast_fanout, ">= 1")
        require(isinstance(self.leaf_gather, bool), "topology.leaf_gather", self.leaf_gather, "true or false")
        require(
            self.nodes is None or (isinstance(self.nodes, int) and self.nodes >= 1),
            "topology.nodes",
            self.nodes,
            "null or an integer >= 1",
        )

    def node_sizes(self, learners: int) -> list[int]:
        """Learners on each node, nodes in order (learner l sits on the node its rank falls in)."""
        if self.nodes is None:
            per = self.learners_per_node
            return [min(per, learners - nd * per) for nd in range(-(-learners // per))]
        k = min(self.nodes, learners)
        q, r = divmod(learners, k)
        return [q + 1] * r + [q] * (k - r)

    def gather(self, learners: int) -> list[int]:
        """Gradients each leaf PS holds before it relays: its node's learners with ``leaf_gather``, else 1."""
        sizes = self.node_sizes(learners)
        return sizes if self.leaf_gather else [1] * len(sizes)

    @property
    def tree(self) -> bool:
        return self.name != "rudra_base"

    @property
    def background_comm(self) -> bool:
        return self.name == "rudra_adv_star"

    def node_of(self, learners: int) -> list[int]:
        """The node of each of ``learners`` learners."""
        return [nd for nd, k in enumerate(self.node_sizes(learners)) for _ in range(k)]

    def broadcast_hops(self, learners: int) -> list[int]:
        """Arrival order of each learner in the weight-broadcast tree (Rudra-adv*).

        The root sends to ``fanout`` learners one after the other; every learner forwards
        to its ``fanout`` children the same way (a ``fanout``-ary heap layout). The value
        for learner ``l`` is the number of sequential sends before ``l`` holds the weights.
        """
        f = self.broadcast_fanout
        hops = [0] * learners
        for l in range(learners):
            if l < f:
                hops[l] = l + 1
            else:
                parent, k = divmod(l - f, f)
                hops[l] = hops[parent] + k + 1
        return hops
