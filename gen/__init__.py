"""fetta generator side: configuration, layer specs, tensor networks, CLI.

Sub-modules (see ``docs/architecture.md``):

* :mod:`gen.design.config`   - the one configuration object (:class:`FettaConfig`)
* :mod:`gen.workload.spec`     - tensorized layer specs (INTERFACES section 1)
* :mod:`gen.workload.network`  - the tensor network of each phase (FP, BP, WG)
* :mod:`gen.cli`      - the ``fetta`` command line
"""

from gen.errors import FettaError, ConfigError, SpecError

__all__ = ["FettaError", "ConfigError", "SpecError"]
__version__ = "0.1.0"
