"""A simulated GPU fleet in one process: per node an emulated NVML, the node agent, and the
simulated device plugin, swept by a background thread.

The end-to-end tests and bench/rollout.py run it beside the real control plane, so the
operator, the scheduler and kwok see what they would see on real GPU nodes.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import structlog

from migplan.operator.agent.node import Bindings, NodeAgent
from migplan.operator.agent.reconcile import reconcile_gpu
from migplan.operator.kube.seam import Kube
from migplan.operator.nvml.adapter import NvmlAdapter
from migplan.operator.nvml.emulator import FakeNvml
from migplan.operator.sim.device_plugin import SimulatedDevicePlugin
from migplan.operator.sim.dra_plugin import SimulatedDraPlugin
from migplan.planner.hardware.catalog import Catalog
from migplan.planner.hardware.layout import Instance, Layout

log = structlog.get_logger("migplan.sim")


def _binding(fake: FakeNvml) -> Any:
    return fake.pynvml


class _Both:
    """Holders from the device plugin and from DRA claims, as kubelet lists both."""

    def __init__(self, *sources: Bindings) -> None:
        self._sources = sources

    def bindings(self, node: str) -> dict[tuple[int, Instance], str]:
        found: dict[tuple[int, Instance], str] = {}
        for source in self._sources:
            found.update(source.bindings(node))
        return found


def emulated_node(models: list[str], layouts: list[str], *, catalog: Catalog) -> FakeNvml:
    """Emulated GPUs of `models`, MIG on, each holding its layout (canonical text)."""
    fake = FakeNvml(models, mig=True)
    with NvmlAdapter(fake.pynvml) as nvml:
        for device, layout in zip(nvml.devices(), layouts, strict=True):
            reconcile_gpu(
                nvml,
                index=device.index,
                model=catalog.model(device.name),
                desired=Layout.parse(layout),
            )
    return fake


class SimulatedFleet:
    """Agents and a device plugin for `nodes` (node name -> its emulated GPUs)."""

    def __init__(
        self,
        *,
        api: Kube,
        nodes: dict[str, FakeNvml],
        catalog: Catalog,
        interval: float = 0.5,
        workers: int = 1,
        dra: bool = False,
    ) -> None:
        self.nodes = nodes
        self.workers = workers
        """Nodes swept at once: each node's agent waits on the API in turn, so a fleet of
        a thousand takes minutes per sweep with one."""
        self.plugin = SimulatedDevicePlugin(api=api, nodes=nodes)
        self.dra = SimulatedDraPlugin(api=api, nodes=nodes, catalog=catalog) if dra else None
        """NVIDIA's DRA kubelet plugin (static MIG devices), where the fleet runs one."""
        self._bindings: Bindings = self.plugin if self.dra is None else _Both(self.plugin, self.dra)
        self._api = api
        self._catalog = catalog
        self.agents = {name: self._agent(name, fake) for name, fake in nodes.items()}
        self.interval = interval
        self.hooks: list[Callable[[str], None]] = []
        """Run for every node in every sweep (a simulated mig-manager, say)."""
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def _agent(self, name: str, fake: FakeNvml) -> NodeAgent:
        return NodeAgent(
            api=self._api,
            node=name,
            nvml=functools.partial(_binding, fake),
            catalog=self._catalog,
            bindings=self._bindings,
            device_plugin=self.plugin,
            allocatable_timeout=5.0,
            dra_plugin=self.dra,
        )

    def adopt(self, name: str, fake: FakeNvml) -> None:
        """A node that joined while the fleet runs (an autoscaler added it): from the next
        sweep its GPUs are `fake`, with an agent and the device plugin like every other."""
        self.nodes[name] = fake  # the device plugins hold this mapping too
        self.plugin.publish(name)
        if self.dra is not None:
            self.dra.publish(name)
        self.agents = {**self.agents, name: self._agent(name, fake)}

    def sweep(self) -> None:
        """One pass over every node: bind scheduled pods, then run its agent once."""
        names = list(self.agents)  # `adopt` may add one meanwhile
        if self.workers == 1:
            for name in names:
                self._visit(name)
            return
        with ThreadPoolExecutor(self.workers, thread_name_prefix="simulated-node") as pool:
            list(pool.map(self._visit, names))

    def _visit(self, name: str) -> None:
        try:
            self.plugin.sync(name)
            if self.dra is not None:
                self.dra.sync(name)
            for hook in self.hooks:
                hook(name)
            self.agents[name].run_once()
        except Exception as exc:  # a sweep must go on to the other nodes
            self.errors.append(f"{name}: {exc!r}")
            log.warning("sweep failed", node=name, error=repr(exc))

    def start(self) -> SimulatedFleet:
        """Publish every node's resources and sweep in the background until `stop`."""
        for name in self.nodes:
            self.plugin.publish(name)
            if self.dra is not None:
                self.dra.publish(name)

        def loop() -> None:
            while not self._stop.is_set():
                started = time.monotonic()
                self.sweep()
                self._wake.wait(max(0.0, self.interval - (time.monotonic() - started)))
                self._wake.clear()

        self._thread = threading.Thread(target=loop, name="simulated-fleet", daemon=True)
        self._thread.start()
        return self

    def pace(self, interval: float) -> None:
        """Sweep every `interval` seconds from now on, the next sweep at once."""
        self.interval = interval
        self._wake.set()

    def stop(self) -> None:
        """Stop sweeping (waits for the current sweep)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
