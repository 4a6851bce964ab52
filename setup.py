"""The compiled parts are optional: without a C compiler accuscope installs and runs on their
Python / numpy versions (same results, slower on big dumps)."""
from setuptools import Extension, setup

FLAGS = ["-O3", "-std=c99"]
setup(ext_modules=[
    Extension("accuscope.engine.compare._kernel", ["tui/accuscope/engine/compare/_kernel.c"],
              extra_compile_args=[*FLAGS, "-fopenmp-simd", "-fno-trapping-math", "-ffp-contract=off"], extra_link_args=["-pthread"], optional=True),
    Extension("accuscope.engine.sources._dumpscan", ["tui/accuscope/engine/sources/_dumpscan.c"],
              extra_compile_args=[*FLAGS, "-D_GNU_SOURCE"], optional=True),
    Extension("accuscope.engine.sources._npyread", ["tui/accuscope/engine/sources/_npyread.c"],
              extra_compile_args=FLAGS, optional=True),
])
