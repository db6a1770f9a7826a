"""kreplay from Python: results as pandas DataFrames, cases from numpy/torch.

    import kreplay
    df = kreplay.read_results("runs/today/results.h5")      # or the run folder
    df.groupby("kernel")["metrics.rel_fro"].max()
    kreplay.write_case("case.h5", M, N, K, x=..., weight=..., weight_scale=...)

Column names are those of results.csv and results.json (the field table of
harness/results/result_fields.h); a value a row does not have is NaN.  The capture
hook is kreplay.capture.  pandas is needed by read_results only.
"""
from .capture import CaseError, write_case
from .results import read_results

__all__ = ["CaseError", "read_results", "write_case"]
__version__ = "0.1.0"
