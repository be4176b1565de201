"""Design base: what the hardware, the compiler, the emulator and the model all read.

* :mod:`gen.design.config`  - the one configuration object (:class:`FettaConfig`) and its rules
* :mod:`gen.design.isa`     - instruction format, opcodes, dataflows, CE mappings, error codes, timing constants
* :mod:`gen.design.netsem`  - semantics of the distribution and reduction networks (the RTL's oracle)
* :mod:`gen.design.routing` - control words for the networks, checked against :mod:`gen.design.netsem`

Nothing here imports another layer of the project (``docs/architecture.md``).
"""
