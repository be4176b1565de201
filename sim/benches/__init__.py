"""cocotb testbenches (loaded by the simulator through :func:`sim.runner.run_cocotb`)."""
