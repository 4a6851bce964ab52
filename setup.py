"""The compiled metric kernel is optional: without a C compiler accuscope installs and runs on its
numpy fallback (same numbers, several times slower on big dumps)."""
from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "accuscope.engine.compare._kernel", ["tui/accuscope/engine/compare/_kernel.c"],
    extra_compile_args=["-O3", "-fopenmp-simd", "-fno-trapping-math", "-ffp-contract=off", "-std=c99"], optional=True)])
