"""What the kit shares is stated once: the variable that names the chapter file (read from the
source text of ``src/`` and ``checkpoints/``), and the writer that makes a file appear whole
(ruff's banned-api rule). Each rule also proves that it would find a second statement.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = sorted([*(ROOT / "src").rglob("*.py"), *(ROOT / "checkpoints").glob("*.py")])


def stating(text: str, files: list[Path] = CODE) -> list[str]:
    """The files (relative to the repository) whose source contains ``text``."""
    return [path.relative_to(ROOT).as_posix() for path in files if text in path.read_text()]


def test_the_implementation_variable_is_spelled_only_in_the_runtime_package() -> None:
    """Everyone else says ``lucyshop.IMPL_ENV`` (the lab's ``loader.ENV``)."""
    assert stating('"LEASES_IMPL"') == ["src/lucyshop/__init__.py"]


def test_a_second_statement_would_be_found() -> None:
    planted = ROOT / "tests" / "test_one_place.py"  # this file states it, as a module might
    assert "tests/test_one_place.py" in stating('"LEASES_IMPL"', [*CODE, planted])
