"""The build backend of the kreplay Python package (PEP 517 and 660).

The package is pure Python, so its wheel is a zip of kreplay/*.py and the
.dist-info files, written here straight into the directory pip names.
Nothing is written beside the sources (no build/, no *.egg-info) and
nothing is downloaded (pyproject.toml's build requires are empty), so
`pip install ./python` works offline and leaves the checkout as it was.
The project's metadata is pyproject.toml's [project] table.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # python/


def _forget_own_bytecode():
    # Importing this module cached its bytecode in _backend/__pycache__;
    # that is the one file the build would leave in the source tree.
    cached = globals().get("__cached__")
    try:
        if cached and os.path.isfile(cached):
            os.remove(cached)
            os.rmdir(os.path.dirname(cached))
    except OSError:
        pass


_forget_own_bytecode()


def _toml_value(text):
    text = text.strip()
    if text.startswith("["):
        return re.findall(r'"((?:[^"\\]|\\.)*)"', text)
    return text.strip('"')


def _strip_comment(line):
    out, quoted = [], False
    for ch in line:
        if ch == '"':
            quoted = not quoted
        elif ch == "#" and not quoted:
            break
        out.append(ch)
    return "".join(out).strip()


def _read_pyproject():
    path = os.path.join(ROOT, "pyproject.toml")
    try:
        import tomllib
    except ImportError:
        tomllib = None
    if tomllib:
        with open(path, "rb") as fp:
            return tomllib.load(fp)
    # Python < 3.11: the subset the file uses (strings, one-line lists).
    data, table = {}, None
    with open(path, encoding="utf-8") as fp:
        for raw in fp:
            line = _strip_comment(raw)
            m = re.match(r"^\[([^\]]+)\]$", line)
            if m:
                table = data
                for part in m.group(1).split("."):
                    table = table.setdefault(part.strip(), {})
                continue
            key, eq, value = line.partition("=")
            if table is not None and eq:
                table[key.strip().strip('"')] = _toml_value(value)
    return data


def _project():
    return _read_pyproject()["project"]


def _dist_name(p):
    return "%s-%s" % (re.sub(r"[-_.]+", "_", p["name"]).lower(), p["version"])


def _metadata(p):
    lines = ["Metadata-Version: 2.1", "Name: %s" % p["name"], "Version: %s" % p["version"]]
    if p.get("description"):
        lines.append("Summary: %s" % p["description"])
    if p.get("requires-python"):
        lines.append("Requires-Python: %s" % p["requires-python"])
    for dep in p.get("dependencies", []):
        lines.append("Requires-Dist: %s" % dep)
    for extra, deps in p.get("optional-dependencies", {}).items():
        lines.append("Provides-Extra: %s" % extra)
        for dep in deps:
            lines.append('Requires-Dist: %s; extra == "%s"' % (dep, extra))
    readme = p.get("readme")
    body = ""
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(ROOT, readme), encoding="utf-8") as fp:
            body = fp.read()
    return ("\n".join(lines) + "\n\n" + body).encode("utf-8")


def _package_files(p):
    """(archive name, path) of every .py file of the package directory."""
    package = re.sub(r"[-.]+", "_", p["name"])
    out = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, package)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                out.append((os.path.relpath(path, ROOT).replace(os.sep, "/"), path))
    return out


def _dist_info_files(p):
    dist = _dist_name(p)
    return {
        dist + ".dist-info/METADATA": _metadata(p),
        dist + ".dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: kreplay_build\n"
                                   b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }


def _write_wheel(directory, entries):
    """entries: (archive name, bytes); RECORD is added last."""
    p = _project()
    dist = _dist_name(p)
    wheel = dist + "-py3-none-any.whl"
    record = []
    # A fixed time: the same sources give the same wheel bytes.
    stamp = (1980, 1, 1, 0, 0, 0)
    with zipfile.ZipFile(os.path.join(directory, wheel), "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries + sorted(_dist_info_files(p).items()):
            zf.writestr(zipfile.ZipInfo(name, stamp), data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append("%s,sha256=%s,%d" % (name, digest, len(data)))
        record_name = dist + ".dist-info/RECORD"
        record.append(record_name + ",,")
        zf.writestr(zipfile.ZipInfo(record_name, stamp), "\n".join(record) + "\n")
    return wheel


def _read(path):
    with open(path, "rb") as fp:
        return fp.read()


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    p = _project()
    for name, data in _dist_info_files(p).items():
        path = os.path.join(metadata_directory, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fp:
            fp.write(data)
    return _dist_name(p) + ".dist-info"


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(name, _read(path)) for name, path in _package_files(_project())])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # `pip install -e ./python`: a .pth file puts the checkout's python/ on sys.path.
    pth = "%s.pth" % re.sub(r"[-.]+", "_", _project()["name"])
    return _write_wheel(wheel_directory, [(pth, (ROOT + "\n").encode("utf-8"))])


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    base = _dist_name(p)
    name = base + ".tar.gz"
    files = [("pyproject.toml", os.path.join(ROOT, "pyproject.toml")),
             ("_backend/kreplay_build.py", os.path.abspath(__file__))] + _package_files(p)
    if p.get("readme"):
        files.append((p["readme"], os.path.join(ROOT, p["readme"])))
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tf:
        def add(arcname, data):
            info = tarfile.TarInfo("%s/%s" % (base, arcname))
            info.size = len(data)
            info.mode = 0o644
            tf.addfile(info, io.BytesIO(data))
        add("PKG-INFO", _metadata(p))
        for arcname, path in files:
            add(arcname, _read(path))
    return name
