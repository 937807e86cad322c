"""``knowledge/refresh/dependency_metadata``: a release's requirements read from its sdist
as data (PKG-INFO when it is the release's word, else setup.py's literals, never run)."""

from __future__ import annotations

from hpcenv.knowledge import build_isolation
from hpcenv.knowledge.refresh.dependency_metadata import requirements_of

#: flash_attn-2.5.8.tar.gz's PKG-INFO (Metadata-Version 2.1: no Requires-Dist) and the
#: setup() call of its setup.py, abridged (https://pypi.org/simple/flash-attn/)
OLD_PKG_INFO = "Metadata-Version: 2.1\nName: flash_attn\nVersion: 2.5.8\nRequires-Python: >=3.7\n"
SETUP_PY = """
import torch
setup(
    name=PACKAGE_NAME,
    version=get_package_version(),
    python_requires=">=3.7",
    install_requires=[
        "torch",
        "einops",
    ],
)
"""
NEW_PKG_INFO = (
    "Metadata-Version: 2.4\nName: flash_attn\nVersion: 2.8.3.post2\n"
    "Requires-Python: >=3.9\nRequires-Dist: torch\nRequires-Dist: einops\n"
)


def test_a_pkg_info_of_metadata_2_2_or_later_is_the_releases_word() -> None:
    assert requirements_of(NEW_PKG_INFO, None) == (["torch", "einops"], ">=3.9", "PKG-INFO")
    dynamic = NEW_PKG_INFO.replace("Requires-Python", "Dynamic: Requires-Dist\nRequires-Python")
    assert requirements_of(dynamic, None) is None  # declared dynamic: only code knows


def test_an_older_pkg_info_falls_back_to_setup_py_literals() -> None:
    assert requirements_of(OLD_PKG_INFO, SETUP_PY) == (
        ["torch", "einops"],
        ">=3.7",
        "setup.py literal",
    )
    computed = SETUP_PY.replace('[\n        "torch",\n        "einops",\n    ]', "get_reqs()")
    assert requirements_of(OLD_PKG_INFO, computed) is None


def test_the_data_holds_flash_attn_2_5_8_with_its_source() -> None:
    rows = {m.version: m for m in build_isolation.dependency_metadata(["flash_attn", "numpy"])}
    assert rows["2.5.8"].requires_dist[:2] == ("torch", "einops")
    assert rows["2.5.8"].source.startswith("https://files.pythonhosted.org/")
    assert "#sha256=" in rows["2.5.8"].source
