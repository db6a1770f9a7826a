"""kreplay results files (results.h5) as pandas DataFrames."""
import os

SCHEMAS = ("kreplay.results/2", "kreplay.results/1")

# Short names for the columns people group and filter by most, as attributes
# of the frame too: df.rel_fro is df["metrics.rel_fro"].
ALIASES = {
    "rel_fro": "metrics.rel_fro",
    "nmse": "metrics.nmse",
    "max_abs": "metrics.max_abs",
    "worst_row_rel": "metrics.worst_row_rel",
    "cosine": "metrics.cosine",
    "mag_ratio": "metrics.mag_ratio",
    "identical_frac": "ulp.identical_frac",
    "max_ulp": "ulp.max_ulp",
}


def _text(v):
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def read_results(path):
    """The rows of a kreplay results file (or a run folder holding results.h5)
    as a pandas DataFrame, one column per field, strings as str; the file's
    provenance (commit, host, suite_hash, ...) is in df.attrs.  Columns with
    dotted names also answer to their last part where ALIASES says so
    (df.rel_fro, df.groupby("kernel").rel_fro.max())."""
    import h5py
    import numpy as np
    import pandas as pd

    if os.path.isdir(path):
        path = os.path.join(path, "results.h5")
    with h5py.File(path, "r") as f:
        schema = _text(f.attrs.get("schema", ""))
        if schema not in SCHEMAS:
            raise ValueError(f"{path}: schema: is {schema!r}; expected one of {SCHEMAS}")
        if "rows" not in f:
            raise ValueError(f"{path}: /rows: no such dataset; expected the results table")
        rows = f["rows"][:]
        attrs = {k: _text(v) for k, v in f.attrs.items()}
    columns = {}
    for name in rows.dtype.names:
        col = rows[name]
        if col.ndim > 1:          # schema 1: ulp.bins as one array member
            for i in range(col.shape[1]):
                columns[f"{name}.{i}"] = col[:, i]
        elif col.dtype.kind in "OS":
            columns[name] = np.array([_text(v) for v in col], dtype=object)
        else:
            columns[name] = col
    df = pd.DataFrame(columns)
    for short, full in ALIASES.items():
        if full in df.columns and short not in df.columns:
            df[short] = df[full]
    df.attrs.update(attrs)
    return df
