"""What an engine's process runs with: several versions of an engine side by side, one virtualenv each
(``venvs``), how pip fills them (``pip_args``), and the BLAS an MLX child gets on Linux (``blas``).
May import: platform, siliconbench.
"""
