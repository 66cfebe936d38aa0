"""Test-wide settings.

Property tests explore new random cases on every local run; in CI (``CI`` set) they replay a
fixed, derandomized sequence so that a landing never hinges on the draw of the day.  A case
hypothesis finds locally is printed with its reproduction blob and belongs in a regular test.
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
