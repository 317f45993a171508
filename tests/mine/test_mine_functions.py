"""vhmine/mine's functions stay short enough to read at once: none over MAX_LINES lines (its decorators, signature,
docstring and body), in the run, the Ray engine and the join alike (issue 41: a run passes down through
short steps, each in its own module)."""

import ast
from pathlib import Path

MINE = Path(__file__).resolve().parents[2] / "vhmine" / "mine"
MAX_LINES = 80


def long_functions(root: Path = MINE, limit: int = MAX_LINES) -> list[str]:
    """`path:line name (n lines)` for every function or method under root longer than limit lines."""
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                n = node.end_lineno - start + 1
                if n > limit:
                    out.append(f"{path.relative_to(root.parent.parent)}:{node.lineno} {node.name} ({n} lines)")
    return out


def test_no_function_in_mine_is_over_80_lines():
    assert long_functions() == []


def test_the_check_counts_a_functions_every_line(tmp_path):
    body = "\n".join(f"    x{k} = {k}" for k in range(79))
    (tmp_path / "a.py").write_text(f"def short():\n{body}\n")  # 80 lines
    (tmp_path / "b.py").write_text(f"@staticmethod\ndef long():\n{body}\n    return 1\n")  # 82 lines
    assert [s.split(" ", 1)[1] for s in long_functions(tmp_path)] == ["long (82 lines)"]
