"""How a drained node's GPUs are changed and checked: one actuator per way migplan can do
it (its own agent, NVIDIA's mig-manager, or device taints over DynamicMIG), behind one
interface. The stepper keeps what every way shares: cordon, evict, uncordon, roll back."""

from __future__ import annotations

from migplan.operator.controller.actuators.agent import AgentActuator
from migplan.operator.controller.actuators.base import NodeActuator, Setting
from migplan.operator.controller.actuators.mig_manager import MigManagerActuator
from migplan.operator.controller.actuators.steer import SteerActuator
from migplan.planner.api.spec import Actuator, DraMode


def actuator_for(setting: Setting, *, kind: Actuator) -> NodeActuator:
    """The actuator of a plan: steering where its DRA mode says so, else the kind it names."""
    if setting.dra_mode is DraMode.STEER:
        return SteerActuator(setting)
    if kind is Actuator.MIG_MANAGER:
        return MigManagerActuator(setting)
    return AgentActuator(setting)
