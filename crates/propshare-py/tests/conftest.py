import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture
def root() -> pathlib.Path:
    return ROOT


@pytest.fixture
def cli() -> str:
    """The propshare binary: $PROPSHARE_CLI, else one built under target/."""
    given = os.environ.get("PROPSHARE_CLI")
    if given:
        return given
    for kind in ("release", "debug"):
        path = ROOT / "target" / kind / "propshare"
        if path.exists():
            return str(path)
    pytest.skip("no propshare binary (set PROPSHARE_CLI or cargo build --release)")
