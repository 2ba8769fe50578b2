#!/usr/bin/env python3
"""Offline validation of the Kubernetes manifests in deploy/kubernetes/ and of
the harness image's Dockerfile, without a cluster: run by deploy/check.sh in CI.

    check_manifests.py RENDERED.yaml --agents N --url URL --dockerfile FILE
    check_manifests.py RENDERED.yaml --agents N --url URL --dockerfile FILE --self-test

RENDERED.yaml is render.sh's output for N agents. Checks:
  schema     every document against Kubernetes' own OpenAPI schemas, strictly
             (unknown fields rejected), for each version in KUBERNETES_VERSIONS
             (kubernetes-validate ships the schemas: no cluster, no network);
  structure  what the schema cannot see: an Indexed Job with completions =
             parallelism = N and no retries, every agent's interval log named
             by JOB_COMPLETION_INDEX and started at the shared START_AT, the
             merge Job waiting for N agents, both bounded by a deadline and
             on the one results claim, images pinned by tag;
  Dockerfile FROM images pinned, the harness built and installed.
--self-test breaks copies one way at a time and fails unless every broken
copy is rejected (a check that cannot fail is no check).

Exit status 0 when everything holds, 1 with one line per failure otherwise,
2 on unreadable input or a missing kubernetes-validate.
"""

import argparse
import copy
import re
import sys

try:
    import yaml
    import kubernetes_validate
except ImportError as e:  # pragma: no cover
    sys.stderr.write(f"check_manifests.py: {e} (scripts/install-deps installs both)\n")
    sys.exit(2)

# Indexed Jobs are GA since 1.24; the oldest release still served by the big
# clouds, and the newest kubernetes-validate knows.
KUBERNETES_VERSIONS = ["1.28.0", kubernetes_validate.latest_version()]
PVC_NAME = "benchlab-results"


def schema_errors(docs):
    errors = []
    for doc in docs:
        kind = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        for version in KUBERNETES_VERSIONS:
            try:
                kubernetes_validate.validate(doc, version, True)
            except kubernetes_validate.ValidationError as e:
                first = str(e).splitlines()[0]
                errors.append(f"schema {version}: {kind}: {first}")
            except (kubernetes_validate.InvalidSchemaError, kubernetes_validate.SchemaNotFoundError) as e:
                errors.append(f"schema {version}: {kind}: {e}")
    return errors


def pinned(image):
    if not isinstance(image, str) or "@sha256:" in image:
        return isinstance(image, str)
    name, _, tag = image.rpartition(":")
    return bool(name) and "/" not in tag and tag not in ("", "latest")


def only_container(job):
    containers = job.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])
    return containers[0] if len(containers) == 1 else None


def env_of(container):
    return {e.get("name"): e.get("value") for e in container.get("env", [])}


def script_of(container):
    return "\n".join(str(a) for a in container.get("command", []) + container.get("args", []))


def claims_of(job):
    vols = job.get("spec", {}).get("template", {}).get("spec", {}).get("volumes", [])
    return {v.get("persistentVolumeClaim", {}).get("claimName") for v in vols if "persistentVolumeClaim" in v}


def structure_errors(docs, agents, url):
    errors = []
    jobs = {d["metadata"]["labels"].get("app.kubernetes.io/component"): d
            for d in docs if d.get("kind") == "Job" and "labels" in d.get("metadata", {})}
    pvcs = [d for d in docs if d.get("kind") == "PersistentVolumeClaim"]
    if [p.get("metadata", {}).get("name") for p in pvcs] != [PVC_NAME]:
        errors.append(f"expected one PersistentVolumeClaim {PVC_NAME}")
    elif "ReadWriteMany" not in pvcs[0].get("spec", {}).get("accessModes", []):
        errors.append("the results claim must be ReadWriteMany: agents on many nodes write at once")
    agent, merge = jobs.get("load-agent"), jobs.get("merge")
    if agent is None or merge is None:
        return errors + ["expected a load-agent Job and a merge Job"]

    spec = agent["spec"]
    if spec.get("completionMode") != "Indexed":
        errors.append("agents: completionMode must be Indexed (JOB_COMPLETION_INDEX names each agent)")
    if not (spec.get("completions") == spec.get("parallelism") == agents):
        errors.append(f"agents: completions and parallelism must both be {agents} "
                      f"(all agents at once), got {spec.get('completions')}/{spec.get('parallelism')}")
    if spec.get("backoffLimit") != 0:
        errors.append("agents: backoffLimit must be 0 (a retried agent would miss the common start)")
    for name, job in (("agents", agent), ("merge", merge)):
        deadline = job["spec"].get("activeDeadlineSeconds")
        if not isinstance(deadline, int) or deadline <= 0:
            errors.append(f"{name}: activeDeadlineSeconds must bound the Job")
        if job["spec"]["template"]["spec"].get("restartPolicy") != "Never":
            errors.append(f"{name}: restartPolicy must be Never")
        if claims_of(job) != {PVC_NAME}:
            errors.append(f"{name}: must mount the claim {PVC_NAME}")
        c = only_container(job)
        if c is None:
            errors.append(f"{name}: expected exactly one container")
        elif not pinned(c.get("image")):
            errors.append(f"{name}: image {c.get('image')!r} is not pinned by tag")

    c = only_container(agent)
    if c is not None:
        env, script = env_of(c), script_of(c)
        if env.get("TARGET_URL") != url:
            errors.append(f"agents: TARGET_URL is {env.get('TARGET_URL')!r}, not {url!r}")
        if not re.fullmatch(r"[0-9]{10}", str(env.get("START_AT"))):
            errors.append("agents: START_AT must be the shared start in Unix seconds")
        if not re.search(r'--start-at "\$START_AT"', script):
            errors.append("agents: harness run must start at $START_AT")
        if not re.search(r'--hlog "[^"]*\$name\.hlog"', script) or 'name="agent-$JOB_COMPLETION_INDEX"' not in script:
            errors.append("agents: the interval log must be named by $JOB_COMPLETION_INDEX")
        if not re.search(r"\bharness run \"\$TARGET_URL\"", script):
            errors.append("agents: each pod must run `harness run $TARGET_URL`")
    m = only_container(merge)
    if m is not None:
        if env_of(m).get("AGENTS") != str(agents):
            errors.append(f"merge: AGENTS must be {agents}, got {env_of(m).get('AGENTS')!r}")
        if not re.search(r'harness merge "\$dir"/agent-\*\.(json|hlog)', script_of(m)):
            errors.append("merge: must run `harness merge` over every agent's file")
    if c is not None and m is not None and c.get("image") != m.get("image"):
        errors.append("agents and merge must run the same image")
    return errors


def dockerfile_errors(text):
    errors = []
    stages = set()
    for line in text.splitlines():
        m = re.match(r"\s*FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", line, re.I)
        if m:
            if m.group(1) not in stages and not pinned(m.group(1)):
                errors.append(f"Dockerfile: FROM {m.group(1)} is not pinned by tag")
            if m.group(2):
                stages.add(m.group(2))
    if not re.search(r"cargo build --release --locked -p harness\b", text):
        errors.append("Dockerfile: must build the harness (cargo build --release --locked -p harness)")
    if "/usr/local/bin/harness" not in text:
        errors.append("Dockerfile: must install the harness as /usr/local/bin/harness")
    return errors


def all_errors(docs, agents, url, dockerfile):
    return schema_errors(docs) + structure_errors(docs, agents, url) + dockerfile_errors(dockerfile)


def self_test(docs, agents, url, dockerfile):
    """Each broken copy must be rejected; returns the breaks that were not."""
    def job(d, component):
        return next(x for x in d if x.get("kind") == "Job"
                    and x["metadata"]["labels"]["app.kubernetes.io/component"] == component)

    def agent_container(d):
        return job(d, "load-agent")["spec"]["template"]["spec"]["containers"][0]

    def set_env(d, component, name, value):
        c = job(d, component)["spec"]["template"]["spec"]["containers"][0]
        next(e for e in c["env"] if e["name"] == name)["value"] = value

    breaks = {
        "completions as a string (schema)": lambda d: job(d, "load-agent")["spec"].update(completions="four"),
        "an unknown field (strict schema)": lambda d: job(d, "load-agent")["spec"].update(parallelsm=agents),
        "not Indexed": lambda d: job(d, "load-agent")["spec"].pop("completionMode"),
        "parallelism below completions": lambda d: job(d, "load-agent")["spec"].update(parallelism=1),
        "retries": lambda d: job(d, "load-agent")["spec"].update(backoffLimit=3),
        "no deadline": lambda d: job(d, "merge")["spec"].pop("activeDeadlineSeconds"),
        "hlog not named by the index": lambda d: agent_container(d)["args"].__setitem__(
            0, agent_container(d)["args"][0].replace("$JOB_COMPLETION_INDEX", "0")),
        "no shared start": lambda d: agent_container(d)["args"].__setitem__(
            0, agent_container(d)["args"][0].replace('--start-at "$START_AT" ', "")),
        "image on :latest": lambda d: agent_container(d).update(image="benchlab/harness:latest"),
        "merge waits for fewer agents": lambda d: set_env(d, "merge", "AGENTS", "1"),
        "merge of one agent only": lambda d: job(d, "merge")["spec"]["template"]["spec"]["containers"][0][
            "args"].__setitem__(0, job(d, "merge")["spec"]["template"]["spec"]["containers"][0]["args"][0]
                                .replace("agent-*.json", "agent-0.json")),
        "another target": lambda d: set_env(d, "load-agent", "TARGET_URL", "http://elsewhere/"),
        "ReadWriteOnce results": lambda d: next(x for x in d if x["kind"] == "PersistentVolumeClaim")[
            "spec"].update(accessModes=["ReadWriteOnce"]),
    }
    missed = []
    for name, brk in breaks.items():
        broken = copy.deepcopy(docs)
        brk(broken)
        if not all_errors(broken, agents, url, dockerfile):
            missed.append(name)
    for name, text in {
        "unpinned FROM": dockerfile.replace("debian:bookworm-slim", "debian"),
        "harness not built": dockerfile.replace("-p harness", "-p event-loop"),
    }.items():
        if not dockerfile_errors(text):
            missed.append(name)
    return missed, len(breaks) + 2


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rendered")
    ap.add_argument("--agents", type=int, required=True)
    ap.add_argument("--url", required=True)
    ap.add_argument("--dockerfile", required=True)
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    try:
        with open(a.rendered, encoding="utf-8") as fh:
            docs = [d for d in yaml.safe_load_all(fh) if d]
        with open(a.dockerfile, encoding="utf-8") as fh:
            dockerfile = fh.read()
    except (OSError, yaml.YAMLError) as e:
        sys.stderr.write(f"check_manifests.py: {e}\n")
        return 2
    if a.self_test:
        missed, total = self_test(docs, a.agents, a.url, dockerfile)
        for name in missed:
            print(f"self-test: a broken copy passed: {name}")
        print(f"self-test: {total - len(missed)} of {total} broken copies rejected")
        return 1 if missed else 0
    errors = all_errors(docs, a.agents, a.url, dockerfile)
    for e in errors:
        print(e)
    if not errors:
        print(f"{len(docs)} manifests valid for Kubernetes {', '.join(KUBERNETES_VERSIONS)}; structure and Dockerfile hold")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
