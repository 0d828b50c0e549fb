"""setuptools glue: generates gpuest/v1 (and the health messages) from ../proto into
the build tree before the package is copied there. Metadata is in pyproject.toml."""
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_protos  # noqa: E402  (beside this file, not part of the package)


class BuildPyWithProtos(build_py):
    def run(self):
        build_protos.generate(Path(self.build_lib))
        super().run()


setup(cmdclass={"build_py": BuildPyWithProtos})
