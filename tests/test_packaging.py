"""What the wheel declares about itself holds: the license it names is the file it ships."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# sha256 of the Apache License 2.0 as the ASF publishes it
# (https://www.apache.org/licenses/LICENSE-2.0.txt; Debian's /usr/share/common-licenses/Apache-2.0).
APACHE_2_0_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"


def test_license_file_is_the_unmodified_apache_2_0_text() -> None:
    assert hashlib.sha256((ROOT / "LICENSE").read_bytes()).hexdigest() == APACHE_2_0_SHA256


def test_pyproject_declares_the_license_file_it_ships() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
