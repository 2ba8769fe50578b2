#!/usr/bin/env python3
"""Runs a rendered load-agent Job and its merge step on this machine, as
processes: the manifests' own shell scripts and environment, with pod i
given JOB_COMPLETION_INDEX=i, the results volume replaced by a directory
and `harness` taken from --harness. deploy/check.sh uses it to prove that
what the Job runs works with this harness (flags, file names, the merge),
without a cluster.

    run_local.py RENDERED.yaml --harness PATH --results DIR

Checks: every agent and the merge exit 0; merged.json's requests equal the
sum of the agents'; every agent began at or after the shared START_AT.
Exit status 0 when all hold, 1 otherwise, 2 on bad input.
"""

import argparse
import json
import os
import subprocess
import sys

import yaml


def container(docs, component):
    job = next(d for d in docs if d.get("kind") == "Job"
               and d["metadata"]["labels"]["app.kubernetes.io/component"] == component)
    return job, job["spec"]["template"]["spec"]["containers"][0]


def process(c, results, harness_dir, extra_env):
    """The container's command as a local process: its script, its env."""
    script = c["args"][0].replace("/results", results)
    env = {"PATH": f"{harness_dir}:/usr/bin:/bin", **{e["name"]: e["value"] for e in c.get("env", [])}, **extra_env}
    return subprocess.Popen(c["command"] + [script], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rendered")
    ap.add_argument("--harness", required=True)
    ap.add_argument("--results", required=True)
    a = ap.parse_args()
    with open(a.rendered, encoding="utf-8") as fh:
        docs = [d for d in yaml.safe_load_all(fh) if d]
    harness_dir = os.path.dirname(os.path.abspath(a.harness))
    agent_job, agent = container(docs, "load-agent")
    _, merge = container(docs, "merge")
    n = agent_job["spec"]["completions"]
    env = {e["name"]: e["value"] for e in agent["env"]}
    start_at, run = float(env["START_AT"]), env["RUN"]

    failures = []
    # The merge first, as Kubernetes may schedule it: it must wait for the agents.
    merger = process(merge, a.results, harness_dir, {})
    agents = [process(agent, a.results, harness_dir, {"JOB_COMPLETION_INDEX": str(i)}) for i in range(n)]
    for i, p in enumerate(agents):
        out, _ = p.communicate(timeout=300)
        if p.returncode != 0:
            failures.append(f"agent {i} exited {p.returncode}:\n{out}")
    try:
        merged_log, _ = merger.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        merger.kill()
        merged_log, _ = merger.communicate()
        failures.append("the merge step did not finish within 120 s of the agents")
    if merger.returncode != 0:
        failures.append(f"the merge step exited {merger.returncode}:\n{merged_log}")

    out_dir = os.path.join(a.results, run)
    try:
        runs = [json.load(open(os.path.join(out_dir, f"agent-{i}.json"), encoding="utf-8")) for i in range(n)]
        merged = json.load(open(os.path.join(out_dir, "merged.json"), encoding="utf-8"))
    except (OSError, ValueError) as e:
        failures.append(f"reading the results: {e}")
        runs, merged = [], None
    if merged is not None:
        total = sum(r["requests"]["total"] for r in runs)
        if merged["requests"]["total"] != total or total == 0:
            failures.append(f"merged requests {merged['requests']['total']} != the agents' sum {total}")
        for i, r in enumerate(runs):
            rec = r.get("recording") or {}
            if rec.get("start_at_unix_s") != start_at or rec.get("late_s") is None or rec["late_s"] < 0:
                failures.append(f"agent {i} did not begin at the shared start {start_at}: {rec}")
        print(f"{n} agents, {total} requests, merged {merged['requests']['total']}; merge log:\n{merged_log}")
    for f in failures:
        print(f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
