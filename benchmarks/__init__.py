"""fetta benchmarks: ``python -m benchmarks [NAME] [ARGS...]`` runs ``benchmarks/NAME.py:main``.

Each module writes its result table into its docs file (between marker comments).
"""
