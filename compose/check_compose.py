#!/usr/bin/env python3
"""Structural checks of the compose files (what `docker compose config` cannot
see): run by compose/check.sh in CI, without a Docker engine.

    check_compose.py [--compose-dir DIR] [--bridge FILE...] [--host FILE...]
    check_compose.py --self-test

--bridge: the files of the bridge variant (default: docker-compose.yml);
--host:   the files of the host variant, merged in order (default:
          docker-compose.yml docker-compose.host.yml);
--debian: the override for a machine without Docker Hub (default:
          docker-compose.debian.yml; --debian '' to leave it out): checked
          merged after the first file of each variant, as
          debian-compose.sh runs it.

Bridge variant: every service has a healthcheck, `restart: unless-stopped`,
and an image pinned by tag (not `latest`) or a build whose Dockerfile exists
and whose FROM images are pinned; every stack (every service but mysql)
publishes a port and has DB_HOST=mysql; nothing is privileged.
Host variant: every service has `network_mode: host`; every stack has a
non-empty cpuset and DB_HOST=127.0.0.1.
Debian variants (both of the above, with the override merged in): the same
checks, and every service outside the profile needs-docker-hub builds from
local images only (each FROM, its ARGs resolved from the build args and the
Dockerfile's defaults, is a benchlab/ image: no registry is asked), under an
image tag other than the one of the files without the override (a build
here never replaces a Docker Hub one); the mysql service passes no MySQL-only
option (--mysql-native-password) to MariaDB.

The database, in every merged variant (what `docker compose config` cannot
see, and what broke the host variant for every stack once):
- every flag of an earlier file's mysql `command` survives a later file
  that replaces the command for the same image (Compose replaces
  `command` whole; an override that changes the image starts afresh);
- the users of mysql/init.sql can log in: a plugin named by IDENTIFIED WITH
  is one the server loads (MySQL 8.4 loads mysql_native_password only with
  --mysql-native-password=ON; MariaDB has it built in, and its entrypoint,
  mysql/entrypoint-debian.sh, drops the MySQL-only flag);
- its healthcheck logs in as the stacks do (`mysqladmin ping` exits 0 on
  "Access denied", so a database nobody can log in to looked healthy);
- with host networking it binds 127.0.0.1, on the DB_PORT the stacks use.

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


_ARG_REF = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def dockerfile_froms(path, build_args=None):
    """Images named by FROM lines (stage references excluded). $NAME and
    ${NAME} are resolved from build_args, else from the default of an ARG
    before the FROM; an unresolved reference stays in the name."""
    build_args = build_args or {}
    defaults, stages, images = {}, set(), []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            a = re.match(r"\s*ARG\s+(\w+)(?:=(\S*))?\s*$", line, re.I)
            if a:
                defaults[a.group(1)] = a.group(2)
                continue
            m = re.match(r"\s*FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", line, re.I)
            if not m:
                continue
            image, stage = m.group(1), m.group(2)

            def arg(ref):
                name = ref.group(1) or ref.group(2)
                val = build_args.get(name) or defaults.get(name)
                return val if val else ref.group(0)

            image = _ARG_REF.sub(arg, image)
            if image.lower() not in stages and image != "scratch":
                images.append(image)
            if stage:
                stages.add(stage.lower())
    return images


def build_of(svc, compose_dir):
    """(Dockerfile path, build args) of a service's build, or None."""
    build = svc.get("build")
    if not build:
        return None
    if isinstance(build, str):
        build = {"context": build}
    ctx = os.path.normpath(os.path.join(compose_dir, str(build.get("context", "."))))
    dockerfile = os.path.normpath(os.path.join(ctx, str(build.get("dockerfile", "Dockerfile"))))
    args = build.get("args") or {}
    if isinstance(args, list):
        args = dict(str(a).partition("=")[::2] for a in args)
    return dockerfile, {str(k): ("" if v is None else str(v)) for k, v in args.items()}


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
        dockerfile, build_args = build_of(svc, compose_dir)
        if not os.path.isfile(dockerfile):
            errors.append(f"{where}: service {name}: Dockerfile not found: {dockerfile}")
        else:
            for img in dockerfile_froms(dockerfile, build_args):
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


OFFLINE_PROFILE = "needs-docker-hub"
LOCAL_PREFIX = "benchlab/"


def check_offline(doc, plain, compose_dir, where, errors):
    """The Debian override: no registry asked, no Docker Hub image replaced."""
    services = doc.get("services") or {}
    plain_services = plain.get("services") or {}
    for name, svc in services.items():
        svc = svc or {}
        if OFFLINE_PROFILE in (svc.get("profiles") or []):
            continue
        b = build_of(svc, compose_dir)
        if b is None:
            errors.append(f"{where}: service {name}: not built here (image {svc.get('image')!r} would be "
                          f"pulled): build it on the base, or give it the profile {OFFLINE_PROFILE}")
            continue
        dockerfile, build_args = b
        if os.path.isfile(dockerfile):
            for img in dockerfile_froms(dockerfile, build_args):
                if not img.startswith(LOCAL_PREFIX):
                    errors.append(f"{where}: service {name}: {os.path.relpath(dockerfile, compose_dir)}: "
                                  f"FROM {img} needs a registry (want a {LOCAL_PREFIX} image, e.g. "
                                  "${BASE_IMAGE}), or give the service the profile " + OFFLINE_PROFILE)
        image = svc.get("image")
        plain_image = (plain_services.get(name) or {}).get("image")
        if not image:
            errors.append(f"{where}: service {name}: no image tag (a rerun would not reuse the build)")
        elif image == plain_image:
            errors.append(f"{where}: service {name}: image {image} is also the tag of the files without "
                          "the override: a build here would replace that image")


INIT_SQL = os.path.join("mysql", "init.sql")
MARIADB_ENTRYPOINT = os.path.join("mysql", "entrypoint-debian.sh")
# Options only MySQL knows; MariaDB refuses to start on an unknown option, so
# the Debian image's entrypoint must drop each one a compose file may pass.
MYSQL_ONLY_FLAGS = ("--mysql-native-password",)


def command_of(svc):
    cmd = svc.get("command") or []
    return [str(c) for c in cmd] if isinstance(cmd, list) else str(cmd).split()


def flag_key(arg):
    """--bind-address=127.0.0.1 -> --bind-address; '_' and '-' are one in MySQL options."""
    return arg.split("=", 1)[0].replace("_", "-")


def flag_value(cmd, key):
    for a in cmd:
        if flag_key(a) == key:
            return a.split("=", 1)[1] if "=" in a else ""
    return None


def image_identity(svc):
    b = svc.get("build")
    if isinstance(b, dict):
        b = (b.get("context"), b.get("dockerfile"))
    return (svc.get("image"), str(b))


def db_server(svc):
    """('mysql', (major, minor)) for the official MySQL image, ('mariadb', None)
    for the lab's Debian MariaDB, (None, None) otherwise."""
    image = str(svc.get("image") or "")
    build = svc.get("build") or {}
    dockerfile = str(build.get("dockerfile", "")) if isinstance(build, dict) else ""
    if "mariadb" in image or dockerfile.endswith("Dockerfile.debian"):
        return "mariadb", None
    m = re.match(r"(?:docker\.io/)?(?:library/)?mysql:(\d+)\.(\d+)", image)
    if m:
        return "mysql", (int(m.group(1)), int(m.group(2)))
    return None, None


def init_plugins(compose_dir):
    """The authentication plugins init.sql names (IDENTIFIED WITH <plugin>)."""
    try:
        with open(os.path.join(compose_dir, INIT_SQL), encoding="utf-8") as fh:
            sql = fh.read()
    except OSError:
        return set()
    return {p.lower() for p in re.findall(r"IDENTIFIED\s+WITH\s+(\w+)", sql, re.I)}


def check_command_survives(files, where, errors):
    """Every flag of an earlier file's mysql command survives a later file's
    replacement of it, unless that file also changed the image."""
    merged, identity, cmd, set_by = {}, None, None, None
    for f in files:
        with open(f, encoding="utf-8") as fh:
            layer = ((yaml.safe_load(fh) or {}).get("services") or {}).get(DB_SERVICE) or {}
        merged = merge(merged, layer)
        new_identity = image_identity(merged)
        if "command" in layer:
            new_cmd = command_of(layer)
            if cmd is not None and new_identity == identity:
                lost = [a for a in cmd if flag_key(a).startswith("--")
                        and flag_key(a) not in {flag_key(b) for b in new_cmd}]
                if lost:
                    errors.append(f"{where}: service {DB_SERVICE}: {os.path.basename(f)} replaces the command of "
                                  f"{os.path.basename(set_by)} and drops {', '.join(lost)} (Compose replaces "
                                  "`command` whole: repeat every flag the server needs)")
            cmd, set_by = new_cmd, f
        identity = new_identity


def check_database(doc, files, compose_dir, where, errors, host):
    services = doc.get("services") or {}
    svc = services.get(DB_SERVICE)
    if not svc:
        return
    check_command_survives(files, where, errors)
    cmd = command_of(svc)
    kind, version = db_server(svc)
    plugins = init_plugins(compose_dir)
    if kind == "mysql" and "mysql_native_password" in plugins and version >= (8, 4):
        if flag_value(cmd, "--mysql-native-password") not in ("ON", "on", "1", "FORCE", ""):
            errors.append(f"{where}: service {DB_SERVICE}: init.sql creates its users IDENTIFIED WITH "
                          f"mysql_native_password, which MySQL {version[0]}.{version[1]} loads only with "
                          f"--mysql-native-password=ON (command: {cmd}): bench cannot log in, every /db answers 503")
    if kind == "mariadb":
        try:
            with open(os.path.join(compose_dir, MARIADB_ENTRYPOINT), encoding="utf-8") as fh:
                entrypoint = fh.read()
        except OSError:
            entrypoint = ""
        for a in cmd:
            if flag_key(a) in MYSQL_ONLY_FLAGS and flag_key(a) not in entrypoint:
                errors.append(f"{where}: service {DB_SERVICE}: command passes {a}, a MySQL-only option "
                              f"MariaDB refuses to start with, and {MARIADB_ENTRYPOINT} does not drop it")
    test = (svc.get("healthcheck") or {}).get("test") or []
    test = " ".join(str(t) for t in test) if isinstance(test, list) else str(test)
    if re.search(r"\bmysqladmin\b.*\bping\b", test) or "-ubench" not in test.replace(" -u ", " -u"):
        errors.append(f"{where}: service {DB_SERVICE}: the healthcheck does not log in as bench ({test!r}): "
                      "`mysqladmin ping` exits 0 on \"Access denied\", so a database nobody can log in to "
                      "looks healthy")
    if host:
        bind = flag_value(cmd, "--bind-address")
        if bind != "127.0.0.1":
            errors.append(f"{where}: service {DB_SERVICE}: with host networking it binds {bind or 'every address'} "
                          "(want --bind-address=127.0.0.1: bench/bench is not for the LAN)")
        port = flag_value(cmd, "--port") or "3306"
        for name, stack in services.items():
            if name == DB_SERVICE:
                continue
            env = env_of(stack or {})
            if "DB_HOST" in env and env.get("DB_PORT", "3306") != port:
                errors.append(f"{where}: stack {name}: DB_PORT {env.get('DB_PORT')!r} is not the port "
                              f"{DB_SERVICE} listens on ({port})")


def with_override(files, debian):
    return files[:1] + [debian] + files[1:]


def run_checks(bridge, host, compose_dir, debian=None):
    errors = []
    check_bridge(load(bridge), compose_dir, errors)
    check_database(load(bridge), bridge, compose_dir, "bridge", errors, host=False)
    check_host(load(host), compose_dir, errors)
    check_database(load(host), host, compose_dir, "host", errors, host=True)
    if debian:
        for where, files, check in (("debian bridge", bridge, check_bridge), ("debian host", host, check_host)):
            layered = with_override(files, debian)
            merged = load(layered)
            sub = []
            check(merged, compose_dir, sub)
            errors.extend(f"debian {e}" for e in sub)
            check_offline(merged, load(files), compose_dir, where, errors)
            check_database(merged, layered, compose_dir, where, errors, host=check is check_host)
    return errors


def self_test(compose_dir):
    """Every mutation must produce at least one failure."""
    import copy
    import tempfile

    base_f = os.path.join(compose_dir, "docker-compose.yml")
    host_f = os.path.join(compose_dir, "docker-compose.host.yml")
    deb_f = os.path.join(compose_dir, "docker-compose.debian.yml")
    with open(base_f, encoding="utf-8") as fh:
        base = yaml.safe_load(fh)
    with open(host_f, encoding="utf-8") as fh:
        over = yaml.safe_load(fh)
    with open(deb_f, encoding="utf-8") as fh:
        deb = yaml.safe_load(fh)
    errors = run_checks([base_f], [base_f, host_f], compose_dir, deb_f)
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
        return lambda bs, ho, de: fn(bs)

    def h(fn):
        return lambda bs, ho, de: fn(ho)

    def d(fn):
        return lambda bs, ho, de: fn(de)

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
        "a Docker Hub FROM (debian)": d(lambda d: d["services"]["php-fpm"]["build"].update(
            dockerfile="php-fpm/Dockerfile")),
        "a service left to pull its image (debian)": d(lambda d: d["services"][DB_SERVICE].pop("build")),
        "profile needs-docker-hub dropped (debian)": d(lambda d: d["services"]["swoole"].pop("profiles")),
        "image tag of the Docker Hub build (debian)": d(lambda d: d["services"]["node"].update(
            image="benchlab/node:0.1.0")),
        "BASE_IMAGE from a registry (debian)": d(lambda d: d["services"]["rust-event-loop"]["build"].update(
            args={"BASE_IMAGE": "debian:bookworm-slim"})),
        "host command drops --mysql-native-password (the shipped defect)": h(lambda d: d["services"][DB_SERVICE]
                                                                             .update(command=["--bind-address=127.0.0.1",
                                                                                              "--port=3306"])),
        "mysql healthcheck by mysqladmin ping": b(lambda d: d["services"][DB_SERVICE]["healthcheck"].update(
            test=["CMD", "mysqladmin", "ping", "-h", "127.0.0.1", "-ubench", "-pbench", "--silent"])),
        "mysql 8.4 without --mysql-native-password (bridge)": b(lambda d: d["services"][DB_SERVICE].pop("command")),
        "mysql binds every address (host)": h(lambda d: d["services"][DB_SERVICE].update(
            command=["--mysql-native-password=ON", "--port=3306"])),
        "mysql on another port than DB_PORT (host)": h(lambda d: d["services"][DB_SERVICE].update(
            command=["--mysql-native-password=ON", "--bind-address=127.0.0.1", "--port=3307"])),
        "a flag of the debian command dropped by the host file (debian host)": d(
            lambda d: d["services"][DB_SERVICE].update(command=["--bind-address=0.0.0.0",
                                                                "--mysql-native-password=ON",
                                                                "--default-authentication-plugin=x"])),
        "healthcheck disabled (debian)": d(lambda d: d["services"]["node"].update(healthcheck={"disable": True})),
    }
    failed = 0
    for label, mutate in mutations.items():
        bs, ho, de = copy.deepcopy(base), copy.deepcopy(over), copy.deepcopy(deb)
        # anchors were expanded by the loader: each service is its own dict
        bs = yaml.safe_load(yaml.safe_dump(bs))
        ho = yaml.safe_load(yaml.safe_dump(ho))
        de = yaml.safe_load(yaml.safe_dump(de))
        mutate(bs, ho, de)
        bf, hf = os.path.join(tmp, "docker-compose.yml"), os.path.join(tmp, "docker-compose.host.yml")
        df = os.path.join(tmp, "docker-compose.debian.yml")
        for f, doc in ((bf, bs), (hf, ho), (df, de)):
            with open(f, "w", encoding="utf-8") as fh:
                yaml.safe_dump(doc, fh)
        errors = run_checks([bf], [bf, hf], compose_dir, df)
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
    ap.add_argument("--debian", default=None, metavar="FILE",
                    help="the override without Docker Hub ('' to leave it out)")
    ap.add_argument("--self-test", action="store_true", help="check that broken copies are rejected")
    args = ap.parse_args()
    d = args.compose_dir
    if args.self_test:
        return self_test(d)
    bridge = args.bridge or [os.path.join(d, "docker-compose.yml")]
    host = args.host or [os.path.join(d, "docker-compose.yml"), os.path.join(d, "docker-compose.host.yml")]

    debian = os.path.join(d, "docker-compose.debian.yml") if args.debian is None else args.debian

    errors = run_checks(bridge, host, d, debian or None)
    files = sorted(set(bridge + host + ([debian] if debian else [])))
    if errors:
        for e in errors:
            print(f"FAIL {e}")
        print(f"check_compose.py: {len(errors)} problem(s) in {', '.join(files)}")
        return 1
    variants = [" + ".join(os.path.basename(f) for f in bridge), " + ".join(os.path.basename(f) for f in host)]
    if debian:
        variants += [" + ".join(os.path.basename(f) for f in with_override(v, debian)) for v in (bridge, host)]
    print(f"check_compose.py: OK ({'; '.join(variants)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
