from gen.cli import main

# guarded: the spawned workers of `fetta synth -j` / `fetta sweep` import this module as __mp_main__
if __name__ == "__main__":
    raise SystemExit(main())
