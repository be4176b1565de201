"""Workloads: tensorized layer specs, the tensor network of each phase, the GEMM grouping of a step.

* :mod:`gen.workload.spec`     - layer specs (``shared/INTERFACES.md`` section 1)
* :mod:`gen.workload.network`  - the FP / BP / WG tensor networks and SSA paths over them
* :mod:`gen.workload.grouping` - a pairwise step as a batched GEMM (batch / m / n / k mode groups)
"""
