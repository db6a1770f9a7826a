"""`import kreplay_capture` with scripts/capture on PYTHONPATH: the capture
hook, which lives in the kreplay Python package (python/kreplay/capture.py).

This module IS that one (sys.modules is pointed at it), so configure(),
set_capture_probe() and the module's state are shared with
`import kreplay.capture`.  The checkout's copy is preferred to an installed
package, so a serve that mounts the checkout runs the code it shows.
"""
import os
import sys

_checkout = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
if os.path.isfile(os.path.join(_checkout, "kreplay", "capture.py")):
    sys.path.insert(0, os.path.abspath(_checkout))

import kreplay.capture as _capture  # noqa: E402

sys.modules[__name__] = _capture
