"""Compiler: a layer's phase -> a :class:`Program` of instruction runs for the accelerator.

* :mod:`gen.compiler.core`  - layouts, GEMM mappings, memory allocation, chunking and the phase driver
  (:func:`compile_layer`)
* :mod:`gen.compiler.gemm`  - the dense GEMM tiler (``fetta run`` on ``dense`` layers)

Execution of a program is not the compiler's business: :mod:`gen.toolflow.execute` runs it on the
emulator or the RTL.
"""

from gen.compiler.core import (CompileError, Compiler, Layout, Program, Run, compile_layer, default_paths,
                               map_gemm_all)

__all__ = ["CompileError", "Layout", "Program", "Run", "Compiler", "compile_layer", "map_gemm_all", "default_paths"]
