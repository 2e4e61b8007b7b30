"""The scoring processes seen from the flow's side: launch, supervise, follow.

- `command`: the worker's command line (`accelerate launch` for several processes).
- `supervise`: one launch: its output streamed, the stall watchdog, killing every rank.
- `progress`: the workers' events, summed into rows and tokens scored.
- `owner`: ScoringProcesses, the object whoever starts the processes owns, and the CLI's offer of
  its processes to the flow.

Nothing here imports Prefect or torch.
"""

from scorekeeper.launch.command import launch_command, visible_gpus
from scorekeeper.launch.owner import ScoringProcesses, offered, offering
from scorekeeper.launch.progress import Progress

__all__ = ["Progress", "ScoringProcesses", "launch_command", "offered", "offering", "visible_gpus"]
