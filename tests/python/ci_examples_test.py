"""docs/ci-examples/: both CI files parse as YAML, have the keys their CI
needs to run the nightly gate, and every kreplay option they use is one the
built kreplay's subcommand accepts (its --help text).

usage: ci_examples_test.py KREPLAY_BINARY SOURCE_DIR
"""
import os
import re
import shlex
import subprocess
import sys

import yaml

kreplay, src = sys.argv[1:3]
d = os.path.join(src, "docs", "ci-examples")


def load(name):
    with open(os.path.join(d, name)) as fp:
        return yaml.safe_load(fp)


def commands(lines):
    """The kreplay command lines among shell lines: (subcommand, [options])."""
    out = []
    for text in lines:
        for line in text.splitlines():
            m = re.search(r"build/kreplay\s+(.*)", line)
            if not m:
                continue
            words = shlex.split(re.sub(r'"\$\{[^}]*\}"|\$\w+', "", m.group(1)))
            out.append((words[0], [w.split("=")[0] for w in words[1:] if w.startswith("--")]))
    return out


gh = load("github-actions-nightly.yml")
on = gh.get("on", gh.get(True))          # YAML 1.1 reads a bare `on` as true
assert on and on["schedule"][0]["cron"], on
job = gh["jobs"]["gate"]
assert job["runs-on"] and job["steps"], job
uses = [s.get("uses", "") for s in job["steps"]]
assert any(u.startswith("actions/checkout@") for u in uses), uses
assert any(u.startswith("actions/upload-artifact@") for u in uses), uses
gh_cmds = commands(s["run"] for s in job["steps"] if "run" in s)

gl = load("gitlab-ci-nightly.yml")
job = gl["kreplay-nightly"]
assert job["stage"] in gl["stages"], job
assert any('"schedule"' in r["if"] for r in job["rules"]), job["rules"]
assert job["artifacts"]["reports"]["junit"] == "runs/nightly.xml", job["artifacts"]
gl_cmds = commands(job["script"])

for name, cmds in (("github", gh_cmds), ("gitlab", gl_cmds)):
    subs = {c for c, _ in cmds}
    assert {"gate", "baseline"} <= subs, (name, cmds)
    gate = [o for c, o in cmds if c == "gate"][0]
    assert "--junit" in gate, (name, gate)
    # The baseline goes in through a shell variable (absent on the first run).
    raw = open(os.path.join(d, "github-actions-nightly.yml" if name == "github"
                            else "gitlab-ci-nightly.yml")).read()
    assert "--baseline baselines/main.h5" in raw, name
    cmds = cmds + [("gate", ["--baseline"])]
    for sub, opts in cmds:
        helpcmd = [kreplay, sub, "update", "--help"] if sub == "baseline" else [kreplay, sub, "--help"]
        r = subprocess.run(helpcmd, capture_output=True, text=True)
        text = r.stdout + r.stderr
        for o in opts:
            assert o in text, f"{name}: kreplay {sub} {o}: not in `kreplay {sub} --help`:\n{text}"
    print(f"{name}: {len(cmds)} kreplay commands, options all known")
