"""Builds the optional C accelerator (kbthreads._accel) when pip installs
the package; everything else is in pyproject.toml. Without a C compiler or
the Python headers the package installs without it (the ctypes path)."""
import os

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))

setup(
    ext_modules=[
        Extension(
            "kbthreads._accel",
            sources=["kbthreads/_accel.c"],
            # the library's public header: the source tree's, else an installed one
            include_dirs=[os.path.join(HERE, "..", "..", "include")],
            optional=True,
        )
    ]
)
