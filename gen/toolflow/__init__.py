"""Tool flow: everything that runs a design or a program through an outside tool or simulator.

* :mod:`gen.toolflow.execute` - run a compiled program (or a GEMM plan) on the emulator; replay on the RTL
* :mod:`gen.toolflow.run`     - the ``fetta run`` flow as a library (dense and tensorized layers)
* :mod:`gen.toolflow.synth`, :mod:`gen.toolflow.fpga` - Yosys synthesis reports, ECP5 place and route
* :mod:`gen.toolflow.sweep`   - parameter sweeps
* :mod:`gen.toolflow.lint`    - Verilator ``-Wall`` on the emitted blocks
* :mod:`gen.toolflow.demo`    - the ``make demo`` flow

Modules are imported one by one (this package imports none of them): each pulls in a simulator or an
outside tool.
"""
