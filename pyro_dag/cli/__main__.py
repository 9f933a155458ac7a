"""``python -m pyro_dag.cli``: the ``pyro-dag`` command, for launchers that start a module rather than a script
(``torchrun --nproc_per_node=2 -m pyro_dag.cli fit --csv ... --distributed``).
"""
import sys

from . import main

sys.exit(main())
