"""Imports of the project's own modules sit at module level, where `lint-imports` sees the layers they cross
(pyproject.toml, [tool.importlinter]). An import inside a function is only for an optional engine (llama_cpp,
torch, vllm, an SDK, ray); one of the project's own modules belongs at the top of the file."""

from __future__ import annotations

import ast
from pathlib import Path

LIBRARY = Path(__file__).resolve().parents[1] / "platform" / "narrative_eval"

ALLOWED: dict[tuple[str, str], str] = {}
"""(file relative to platform/narrative_eval, imported module) -> why that import sits inside a function."""


def function_local_imports(root: Path) -> list[tuple[str, str, int]]:
    """(file, imported module, line) of every import of a narrative_eval module inside a function body."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        functions = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
        for node in {id(inner): inner for function in functions for inner in ast.walk(function)}.values():
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = ["." * node.level + (node.module or "")]
            else:
                continue
            for module in modules:
                if module.startswith(("narrative_eval", ".")):
                    found.append((path.relative_to(root).as_posix(), module, node.lineno))
    return found


def test_no_function_imports_a_project_module_except_the_listed_ones():
    found = function_local_imports(LIBRARY)
    unlisted = [f"{file}:{line} imports {module}" for file, module, line in found if (file, module) not in ALLOWED]
    assert not unlisted, "move these imports to the top of their files (see README 'Layout'):\n" + "\n".join(unlisted)


def test_the_counter_sees_an_import_inside_a_function(tmp_path):
    (tmp_path / "module.py").write_text("import os\n\n\ndef f():\n    from narrative_eval import tracking\n\n"
                                        "    class C:\n        def g(self):\n            from . import sibling\n")
    assert function_local_imports(tmp_path) == [("module.py", "narrative_eval", 5), ("module.py", ".", 9)]
