"""What the capture hook's tests share: their Python modules or the skip
(exit 77) that says which one is missing, and the hook itself from
scripts/capture."""
import importlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def require(test_name, *modules):
    """The named modules, imported; exit 77 naming the first one missing."""
    try:
        return [importlib.import_module(m) for m in modules]
    except ImportError as e:
        sys.stderr.write(f"{test_name}: {e}: skipped\n")
        sys.exit(77)


def capture_hook():
    """scripts/capture/kreplay_capture.py, the module under test."""
    sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts", "capture"))
    return importlib.import_module("kreplay_capture")
