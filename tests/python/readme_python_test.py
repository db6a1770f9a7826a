"""The README's Python commands ("Results for pandas"), run as written, as a
user on Debian 12 runs them: in a fresh directory, with a pyenv-like
`python3` first on PATH that has neither numpy nor h5py, and without a
network.  Each command must succeed, and `pip install ./python` must leave
the package's source directory exactly as it was (no build/, no *.egg-info,
no bytecode).

usage: readme_python_test.py KREPLAY_BINARY SOURCE_DIR TMP_DIR
"""
import os
import re
import shutil
import subprocess
import sys

kreplay, src, tmp = sys.argv[1:4]


def tree(path):
    """Every directory under path, and every file with its size and time (a
    directory's own time changes when a file comes and goes again)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), path)] = "dir"
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            out[os.path.relpath(os.path.join(dirpath, name), path)] = (st.st_size, st.st_mtime_ns)
    return out


readme = open(os.path.join(src, "README.md"), encoding="utf-8").read()
section = readme.split("### Results for pandas", 1)[1]
block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
commands = [line for line in block.splitlines() if line.strip()]
assert any("pip install" in c for c in commands), commands

work = os.path.join(tmp, "user")
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
# The checkout as the user has it: ./python is the source's own directory.
os.symlink(os.path.join(src, "python"), os.path.join(work, "python"))
# A pyenv-like python3 first on PATH: Python without Debian's packages.
shim = os.path.join(work, "pyenv-shims")
os.makedirs(shim)
with open(os.path.join(shim, "python3"), "w") as fp:
    fp.write("#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n")
os.chmod(os.path.join(shim, "python3"), 0o755)
env = dict(os.environ, PATH=shim + os.pathsep + os.environ.get("PATH", ""), PIP_NO_INDEX="1")
env.pop("VIRTUAL_ENV", None)
env.pop("PYTHONDONTWRITEBYTECODE", None)
r = subprocess.run(["python3", "-c", "import h5py"], env=env, capture_output=True, text=True)
assert r.returncode != 0, "the stand-in pyenv python3 must lack h5py"

# The run the README's RUN stands for.
r = subprocess.run([kreplay, "replay", "-o", os.path.join(work, "RUN"), os.path.join(src, "cases", "samples")],
                   capture_output=True, text=True)
assert os.path.isfile(os.path.join(work, "RUN", "results.h5")), r.stderr[-2000:]

before = tree(os.path.join(src, "python"))
script = "set -e\n" + "\n".join(commands) + "\n"
r = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True)
print(r.stdout[-3000:])
assert r.returncode == 0, (r.returncode, r.stdout[-3000:], r.stderr[-3000:])
assert "w4a8.folded" in r.stdout, r.stdout[-2000:]      # the groupby's index: kernel names
after = tree(os.path.join(src, "python"))
assert after == before, ("pip install changed python/",
                         sorted(k for k in set(after) | set(before) if after.get(k) != before.get(k)))
# The venv's kreplay is the installed copy, not the checkout's.
r = subprocess.run([os.path.join(work, ".venv", "bin", "python3"), "-c", "import kreplay; print(kreplay.__file__)"],
                   cwd=tmp, capture_output=True, text=True)
assert r.returncode == 0 and r.stdout.startswith(os.path.join(work, ".venv")), (r.stdout, r.stderr)
print("README Python block: %d commands ran; python/ untouched (%d entries)" % (len(commands), len(after)))
