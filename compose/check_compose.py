#!/usr/bin/env python3
"""Structural checks of the compose files (what `docker compose config` cannot
see): run by compose/check.sh in CI, without a Docker engine.

    check_compose.py [--compose-dir DIR] [--bridge FILE...] [--host FILE...]
    check_compose.py --self-test

--bridge: the files of the bridge variant (default: docker-compose.yml);
--host:   the files of the host variant, merged in order (default:
          docker-compose.yml docker-compose.host.yml).

Bridge variant: every service has a healthcheck, `restart: unless-stopped`,
and an image pinned by tag (not `latest`) or a build whose Dockerfile exists
and whose FROM images are pinned; every stack (every service but mysql)
publishes a port and has DB_HOST=mysql; nothing is privileged.
Host variant: every service has `network_mode: host`; every stack has a
non-empty cpuset and DB_HOST=127.0.0.1.

--self-test: breaks copies of the files one way at a time (a healthcheck
removed, an image on :latest, a cpuset dropped, DB_HOST=mysql in host mode,
...) and fails unless every broken copy is rejected.

Exit status 0 when everything holds, 1 with one line per failure otherwise,
2 on unreadable input. Needs PyYAML (Debian: python3-yaml).
"""

import argparse
import os
import re
import sys

try:
    import yaml
except ImportError:  # pragma: no cover
    sys.stderr.write("check_compose.py: PyYAML is missing (apt-get install python3-yaml)\n")
    sys.exit(2)

DB_SERVICE = "mysql"

_INTERP = re.compile(r"\$(?:\$|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\})")


def interpolate(value):
    """Compose-style ${VAR}, ${VAR:-default}, ${VAR-default}, $$ in strings."""
    if isinstance(value, dict):
        return {k: interpolate(v) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v) for v in value]
    if not isinstance(value, str):
        return value

    def repl(m):
        if m.group(0) == "$$":
            return "$"
        name, op, arg = m.group("name"), m.group("op"), m.group("arg")
        val = os.environ.get(name)
        if op == ":-" and not val:
            return arg
        if op == "-" and val is None:
            return arg
        return val or ""

    return _INTERP.sub(repl, value)


def merge(base, over):
    """Mappings merge key by key (the override wins); anything else is replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = merge(base[k], v) if k in base else v
        return out
    return over


def load(files):
    doc = {}
    for f in files:
        try:
            with open(f, encoding="utf-8") as fh:
                d = yaml.safe_load(fh) or {}
        except (OSError, yaml.YAMLError) as e:
            sys.stderr.write(f"check_compose.py: cannot read {f}: {e}\n")
            sys.exit(2)
        if not isinstance(d, dict):
            sys.stderr.write(f"check_compose.py: {f}: not a mapping\n")
            sys.exit(2)
        doc = merge(doc, d)
    return interpolate(doc)


def env_of(svc):
    env = svc.get("environment") or {}
    if isinstance(env, list):
        out = {}
        for item in env:
            k, _, v = str(item).partition("=")
            out[k] = v
        return out
    return {str(k): ("" if v is None else str(v)) for k, v in env.items()}


def pinned(image):
    """True for name:tag (tag not latest) or name@sha256:..."""
    if "@sha256:" in image:
        return True
    last = image.rsplit("/", 1)[-1]
    if ":" not in last:
        return False
    tag = last.rsplit(":", 1)[1]
    return tag not in ("", "latest")


def dockerfile_froms(path):
    """Images named by FROM lines (stage references excluded)."""
    stages, images = set(), []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            m = re.match(r"\s*FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", line, re.I)
            if not m:
                continue
            image, stage = m.group(1), m.group(2)
            if image.lower() not in stages and image != "scratch":
                images.append(image)
            if stage:
                stages.add(stage.lower())
    return images


def check_common(name, svc, where, errors, compose_dir):
    if svc.get("privileged"):
        errors.append(f"{where}: service {name}: privileged is not allowed")
    hc = svc.get("healthcheck")
    if not isinstance(hc, dict) or hc.get("disable") or not hc.get("test") or hc.get("test") == ["NONE"]:
        errors.append(f"{where}: service {name}: no healthcheck")
    image, build = svc.get("image"), svc.get("build")
    if not image and not build:
        errors.append(f"{where}: service {name}: neither image nor build")
    if image and not pinned(str(image)):
        errors.append(f"{where}: service {name}: image {image!r} is not pinned by tag (no tag or 'latest')")
    if build:
        if isinstance(build, str):
            build = {"context": build}
        ctx = os.path.normpath(os.path.join(compose_dir, str(build.get("context", "."))))
        dockerfile = os.path.join(ctx, str(build.get("dockerfile", "Dockerfile")))
        if not os.path.isfile(dockerfile):
            errors.append(f"{where}: service {name}: Dockerfile not found: {dockerfile}")
        else:
            for img in dockerfile_froms(dockerfile):
                if "$" in img or not pinned(img):
                    errors.append(f"{where}: service {name}: {os.path.relpath(dockerfile, compose_dir)}: "
                                  f"FROM {img} is not pinned by tag")


def check_bridge(doc, compose_dir, errors):
    where = "bridge"
    services = doc.get("services") or {}
    if not services:
        errors.append(f"{where}: no services")
        return
    if DB_SERVICE not in services:
        errors.append(f"{where}: no {DB_SERVICE} service")
    for name, svc in services.items():
        svc = svc or {}
        check_common(name, svc, where, errors, compose_dir)
        if svc.get("restart") != "unless-stopped":
            errors.append(f"{where}: service {name}: restart is {svc.get('restart')!r}, want 'unless-stopped'")
        if svc.get("network_mode") == "host":
            errors.append(f"{where}: service {name}: network_mode host in the bridge variant")
        if name == DB_SERVICE:
            continue
        if not svc.get("ports"):
            errors.append(f"{where}: stack {name}: publishes no port")
        db_host = env_of(svc).get("DB_HOST")
        if db_host != DB_SERVICE:
            errors.append(f"{where}: stack {name}: DB_HOST is {db_host!r}, want {DB_SERVICE!r}")


def check_host(doc, compose_dir, errors):
    where = "host"
    services = doc.get("services") or {}
    if not services:
        errors.append(f"{where}: no services")
        return
    for name, svc in services.items():
        svc = svc or {}
        check_common(name, svc, where, errors, compose_dir)
        if svc.get("network_mode") != "host":
            errors.append(f"{where}: service {name}: network_mode is {svc.get('network_mode')!r}, want 'host'")
        if name == DB_SERVICE:
            continue
        if not str(svc.get("cpuset") or "").strip():
            errors.append(f"{where}: stack {name}: no cpuset")
        db_host = env_of(svc).get("DB_HOST")
        if db_host != "127.0.0.1":
            errors.append(f"{where}: stack {name}: DB_HOST is {db_host!r}, want '127.0.0.1' "
                          "(the service name does not resolve with host networking)")


def run_checks(bridge, host, compose_dir):
    errors = []
    check_bridge(load(bridge), compose_dir, errors)
    check_host(load(host), compose_dir, errors)
    return errors


def self_test(compose_dir):
    """Every mutation must produce at least one failure."""
    import copy
    import tempfile

    base_f = os.path.join(compose_dir, "docker-compose.yml")
    host_f = os.path.join(compose_dir, "docker-compose.host.yml")
    with open(base_f, encoding="utf-8") as fh:
        base = yaml.safe_load(fh)
    with open(host_f, encoding="utf-8") as fh:
        over = yaml.safe_load(fh)
    errors = run_checks([base_f], [base_f, host_f], compose_dir)
    if errors:
        print("self-test: the unmodified files already fail:")
        for e in errors:
            print(f"  {e}")
        return 1

    tmp = tempfile.mkdtemp(prefix="check_compose.")
    bad_ctx = os.path.join(tmp, "badctx")
    os.mkdir(bad_ctx)
    with open(os.path.join(bad_ctx, "Dockerfile"), "w", encoding="utf-8") as fh:
        fh.write("FROM node:20 AS build\nFROM debian\nCOPY --from=build /x /x\n")

    def first_stack(doc):
        return next(n for n in doc["services"] if n != DB_SERVICE)

    def b(fn):
        return lambda bs, ho: fn(bs)

    def h(fn):
        return lambda bs, ho: fn(ho)

    mutations = {
        "healthcheck removed (bridge)": b(lambda d: d["services"][first_stack(d)].pop("healthcheck")),
        "healthcheck disabled": b(lambda d: d["services"][DB_SERVICE].update(healthcheck={"disable": True})),
        "image on :latest": b(lambda d: d["services"][DB_SERVICE].update(image="mariadb:latest")),
        "image without tag": b(lambda d: d["services"][DB_SERVICE].update(image="mariadb")),
        "unpinned FROM in a Dockerfile": b(lambda d: d["services"][first_stack(d)].update(
            build={"context": bad_ctx})),
        "missing Dockerfile": b(lambda d: d["services"][first_stack(d)].update(
            build={"context": tmp, "dockerfile": "nope/Dockerfile"})),
        "no restart policy": b(lambda d: d["services"][first_stack(d)].pop("restart", None)
                               or d["services"][first_stack(d)].update(restart="no")),
        "privileged": b(lambda d: d["services"][first_stack(d)].update(privileged=True)),
        "DB_HOST not mysql (bridge)": b(lambda d: d["services"][first_stack(d)].update(
            environment={"DB_HOST": "127.0.0.1"})),
        "cpuset dropped (host)": h(lambda d: d["services"][first_stack(d)].pop("cpuset")),
        "network_mode dropped (host)": h(lambda d: d["services"][first_stack(d)].pop("network_mode")),
        "DB_HOST=mysql (host)": h(lambda d: d["services"][first_stack(d)].update(
            environment={"DB_HOST": "mysql"})),
        "mysql not on host network (host)": h(lambda d: d["services"][DB_SERVICE].pop("network_mode")),
    }
    failed = 0
    for label, mutate in mutations.items():
        bs, ho = copy.deepcopy(base), copy.deepcopy(over)
        # anchors were expanded by the loader: each service is its own dict
        bs = yaml.safe_load(yaml.safe_dump(bs))
        ho = yaml.safe_load(yaml.safe_dump(ho))
        mutate(bs, ho)
        bf, hf = os.path.join(tmp, "docker-compose.yml"), os.path.join(tmp, "docker-compose.host.yml")
        with open(bf, "w", encoding="utf-8") as fh:
            yaml.safe_dump(bs, fh)
        with open(hf, "w", encoding="utf-8") as fh:
            yaml.safe_dump(ho, fh)
        errors = run_checks([bf], [bf, hf], compose_dir)
        if errors:
            print(f"self-test ok: {label}: rejected ({errors[0]})")
        else:
            print(f"self-test FAIL: {label}: the broken copy passed the checks")
            failed += 1
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"check_compose.py --self-test: {len(mutations) - failed} passed, {failed} failed")
    return 1 if failed else 0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compose-dir", default=here, help="directory the files and build contexts are relative to")
    ap.add_argument("--bridge", nargs="+", default=None, metavar="FILE")
    ap.add_argument("--host", nargs="+", default=None, metavar="FILE")
    ap.add_argument("--self-test", action="store_true", help="check that broken copies are rejected")
    args = ap.parse_args()
    d = args.compose_dir
    if args.self_test:
        return self_test(d)
    bridge = args.bridge or [os.path.join(d, "docker-compose.yml")]
    host = args.host or [os.path.join(d, "docker-compose.yml"), os.path.join(d, "docker-compose.host.yml")]

    errors = run_checks(bridge, host, d)
    if errors:
        for e in errors:
            print(f"FAIL {e}")
        print(f"check_compose.py: {len(errors)} problem(s) in {', '.join(sorted(set(bridge + host)))}")
        return 1
    print(f"check_compose.py: OK ({', '.join(os.path.basename(f) for f in bridge)}; "
          f"{' + '.join(os.path.basename(f) for f in host)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
