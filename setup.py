"""Ships the demo workspace inside the package, for 'applyonce demo' from an installed wheel.

Everything else is in pyproject.toml. The workspace stays at workspaces/demo (the README and the
tests use it there); building the package copies it to applyonce/_demo.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithDemo(build_py):
    def run(self) -> None:
        super().run()
        source = Path(__file__).resolve().parent / "workspaces" / "demo"
        if source.is_dir() and not self.editable_mode:
            self.copy_tree(str(source), str(Path(self.build_lib) / "applyonce" / "_demo"))


setup(cmdclass={"build_py": BuildWithDemo})
