"""How the browser tests start Chromium (no browser is started here)."""

from __future__ import annotations

import re
from pathlib import Path

from browser_helpers import CHROMIUM_ARGS, OMNIBOX_POPUPS, PLAYWRIGHT_DISABLED_FEATURES


def test_the_one_disable_features_flag_keeps_playwrights_own_list():
    """Chromium keeps only the last --disable-features it is given, and Playwright passes its own before ours: ours
    must repeat every feature the installed Playwright disables, then add the omnibox popups."""
    import playwright

    bundle = (Path(playwright.__file__).parent / "driver" / "package" / "lib" / "coreBundle.js").read_text()
    listed = re.search(r"disabledFeatures = \[(.*?)\]", bundle, re.S)
    assert listed, "Playwright's chromiumSwitches moved: find its disabledFeatures list and compare by hand"
    theirs = set(re.findall(r'^\s*"(\w+)"', listed.group(1), re.M))
    assert theirs and theirs <= set(PLAYWRIGHT_DISABLED_FEATURES), sorted(theirs - set(PLAYWRIGHT_DISABLED_FEATURES))
    [flag] = [arg for arg in CHROMIUM_ARGS if arg.startswith("--disable-features=")]
    assert set(flag.split("=", 1)[1].split(",")) == set(PLAYWRIGHT_DISABLED_FEATURES) | set(OMNIBOX_POPUPS)
