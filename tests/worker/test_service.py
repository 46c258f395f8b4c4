"""The worker as a service: the LaunchAgent plist (built for Darwin on this Linux machine),
the systemd user unit (written into a temporary HOME and checked by systemd's own `systemd-analyze verify`),
the 0600 secrets file (read back by systemd's own env-file parser), sleep prevention around a real job,
and `siliconbench doctor` as a real subprocess against the real Redis and PostgreSQL.

caffeinate and logind do not exist here: sleep prevention's process lifecycle is tested with stand-in
executables of the same names on PATH (they record their arguments and hold like the real ones).
"""

from __future__ import annotations

import os
import plistlib
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from siliconbench.contract.jobs import expand
from siliconbench.contract.manifest import ModelCatalog
from siliconbench.contract.spec import parse_sweep

from siliconbench.storage import database, roles
from siliconbench.worker.service import (
    envfile,
    install,
    launchd,
    make_spec,
    prevent_sleep,
    sleep_method,
    systemd,
    uninstall,
)
from siliconbench.worker.service.spec import DEFAULT_STOP_TIMEOUT_S, LABEL, UNIT_NAME
from tests.conftest import SMALL, new_pg_database

ROOT = Path(__file__).resolve().parents[2]
SECRET = "s3cr%t$pw"
BROKER = f"redis://:{SECRET}@coordinator:6379/0"
DB = "postgresql://siliconbench@coordinator:5432/siliconbench"
# Every key launchd.plist(5) documents that the builder may use; anything else would be a typo launchd ignores.
PLIST_KEYS = {
    "Label",
    "ProgramArguments",
    "RunAtLoad",
    "KeepAlive",
    "ProcessType",
    "ThrottleInterval",
    "ExitTimeOut",
    "EnvironmentVariables",
    "WorkingDirectory",
    "StandardOutPath",
    "StandardErrorPath",
}


def cli(*args: str, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "siliconbench.cli.main", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def home(tmp_path) -> dict:
    """An environment whose HOME is a temporary folder and where no systemd user manager answers."""
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("SILICONBENCH_") and k not in ("DBUS_SESSION_BUS_ADDRESS", "XDG_CONFIG_HOME")
    }
    env.update(
        HOME=str(tmp_path / "home"), XDG_RUNTIME_DIR=str(run), XDG_DATA_HOME=str(tmp_path / "home" / ".local/share")
    )
    (tmp_path / "home").mkdir()
    return env


# ------------------------------------------------------------------------------------------- launchd


def test_launchagent_plist_for_darwin(tmp_path):
    home = Path("/Users/mini")
    environ = {
        "PATH": "/opt/homebrew/bin:/usr/bin",
        "SILICONBENCH_MODELS_DIR": "/Users/mini/models",
        "SILICONBENCH_LEASE_S": "30",
        "SILICONBENCH_API_TOKEN": "tok-123",
        "UNRELATED": "x",
    }
    spec = make_spec(
        "Darwin",
        [("--broker", BROKER), ("--database", DB), ("--name", "mini-1"), ("--engines", "mlx")],
        home=home,
        environ=environ,
        program=["/Users/mini/sb/.venv/bin/siliconbench"],
    )
    raw = launchd.render(spec)
    assert raw.startswith(
        b'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN"'
    )
    plist = plistlib.loads(raw, fmt=plistlib.FMT_XML)
    assert set(plist) == PLIST_KEYS
    assert plist["Label"] == LABEL == "org.siliconbench.worker"
    # the arguments the user gave, but the broker URL with its password went to the 0600 file
    assert plist["ProgramArguments"] == [
        "/Users/mini/sb/.venv/bin/siliconbench",
        "worker",
        "--database",
        DB,
        "--name",
        "mini-1",
        "--engines",
        "mlx",
    ]
    assert plist["ProcessType"] == "Interactive"  # no background CPU/IO throttling
    assert plist["RunAtLoad"] is True and plist["KeepAlive"] is True
    assert plist["ExitTimeOut"] == DEFAULT_STOP_TIMEOUT_S > 900 and isinstance(plist["ExitTimeOut"], int)
    assert plist["ThrottleInterval"] == 10
    env = plist["EnvironmentVariables"]
    assert env["SILICONBENCH_ENV_FILE"] == "/Users/mini/Library/Application Support/siliconbench/worker.env"
    assert env["SILICONBENCH_MODELS_DIR"] == "/Users/mini/models" and env["SILICONBENCH_LEASE_S"] == "30"
    assert "SILICONBENCH_API_TOKEN" not in env and "UNRELATED" not in env
    path = env["PATH"].split(":")
    assert path[0] == "/Users/mini/sb/.venv/bin" and {"/usr/sbin", "/usr/bin", "/opt/homebrew/bin"} <= set(path)
    assert env["PYTHONUNBUFFERED"] == "1"
    assert plist["StandardOutPath"] == "/Users/mini/Library/Logs/siliconbench/worker.log"
    assert plist["StandardErrorPath"] == "/Users/mini/Library/Logs/siliconbench/worker.err.log"
    assert plist["WorkingDirectory"] == "/Users/mini"
    assert spec.paths.service_file == home / "Library/LaunchAgents/org.siliconbench.worker.plist"
    assert SECRET.encode() not in raw and b"tok-123" not in raw
    assert spec.secrets == {"SILICONBENCH_BROKER_URL": BROKER, "SILICONBENCH_API_TOKEN": "tok-123"}


def test_darwin_install_writes_agent_and_secrets(tmp_path, home):
    """install() for Darwin into a temp HOME (not loaded: no launchctl here); the worker's loader reads the file."""
    h = Path(home["HOME"])
    lines = install(
        [("--broker", BROKER), ("--database", DB)],
        start=False,
        target="Darwin",
        home=h,
        environ={"PATH": "/usr/bin"},
        stop_timeout_s=1800,
    )
    agent = h / "Library/LaunchAgents/org.siliconbench.worker.plist"
    secrets = h / "Library/Application Support/siliconbench/worker.env"
    assert lines[0] == f"wrote {agent}" and f"launchctl bootstrap gui/{os.getuid()} {agent}" in lines[-1]
    plist = plistlib.loads(agent.read_bytes())
    assert plist["ExitTimeOut"] == 1800 and plist["ProgramArguments"][1:] == ["worker", "--database", DB]
    assert (h / "Library/Logs/siliconbench").is_dir()
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    assert SECRET not in agent.read_text()
    loaded: dict = {}
    assert envfile.load(plist["EnvironmentVariables"]["SILICONBENCH_ENV_FILE"], loaded) == ["SILICONBENCH_BROKER_URL"]
    assert loaded == {"SILICONBENCH_BROKER_URL": BROKER}
    # a variable already set is not overridden
    assert envfile.load(secrets, {"SILICONBENCH_BROKER_URL": "redis://other/0"}) == []
    assert uninstall(stop=False, target="Darwin", home=h) == [f"removed {agent}", f"removed {secrets}"]
    assert not agent.exists() and not secrets.exists()


# ------------------------------------------------------------------------------------------- systemd


def unit_settings(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


def verify(unit: Path, env: dict) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
    r = subprocess.run(
        ["systemd-analyze", "--user", "verify", str(unit)], env=env, capture_output=True, text=True, timeout=60
    )
    ours = [line for line in (r.stdout + r.stderr).splitlines() if unit.name in line]
    assert r.returncode == 0 and not ours, r.stdout + r.stderr


def test_systemd_unit_install_verify_uninstall(home, models_dir):
    env = {**home, "SILICONBENCH_MODELS_DIR": str(models_dir), "SILICONBENCH_LEASE_S": "30"}
    r = cli("worker", "install", "--broker", BROKER, "--database", DB, "--name", "vm-1", env=env)
    assert r.returncode == 0, r.stderr
    h = Path(home["HOME"])
    unit = h / ".config/systemd/user" / UNIT_NAME
    secrets = h / ".config/siliconbench/worker.env"
    out = r.stdout.splitlines()
    assert out[0] == f"wrote {unit}"
    assert out[1].startswith(f"wrote {secrets} (mode 0600): SILICONBENCH_BROKER_URL")
    # no user manager in this environment: said plainly, with the command to run where one exists
    assert any(line.startswith("no systemd user manager here (") for line in out), r.stdout
    assert out[-1].endswith(f"systemctl --user daemon-reload && systemctl --user enable --now {UNIT_NAME}")
    verify(unit, home)
    text = unit.read_text()
    s = unit_settings(text)
    assert s["Restart"] == ["always"] and s["KillSignal"] == ["SIGTERM"] and s["KillMode"] == ["mixed"]
    assert s["TimeoutStopSec"] == [str(DEFAULT_STOP_TIMEOUT_S)] and s["WantedBy"] == ["default.target"]
    assert s["EnvironmentFile"] == [str(secrets)]
    assert not {"CPUQuota", "CPUWeight", "Nice", "IOSchedulingClass", "CPUSchedulingPolicy"} & set(s)
    exec_start = s["ExecStart"][0].split()
    assert Path(exec_start[0]).is_absolute() and os.access(exec_start[0], os.X_OK)
    assert exec_start[1:] == ["worker", "--database", DB, "--name", "vm-1"]  # --broker went to the 0600 file
    env_lines = dict(v.split("=", 1) for v in s["Environment"])
    assert env_lines["SILICONBENCH_MODELS_DIR"] == str(models_dir) and env_lines["SILICONBENCH_LEASE_S"] == "30"
    assert SECRET not in text and "%" not in text.replace("%%", "")
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    assert envfile.parse(secrets.read_text()) == {"SILICONBENCH_BROKER_URL": BROKER}

    r = cli("worker", "uninstall", env=env)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0].startswith("no systemd user manager here (") and out[1:] == [f"removed {unit}", f"removed {secrets}"]
    assert not unit.exists() and not secrets.exists()
    r = cli("worker", "uninstall", env=env)
    assert r.returncode == 0 and f"no worker service was installed here ({unit} absent)" in r.stdout


def test_unit_quoting_survives_systemd(tmp_path, home):
    """An executable, a home and values under paths with a space, % and $: systemd must resolve exactly them."""
    odd = tmp_path / "my env %t $HOME"
    odd.mkdir()
    exe = odd / "siliconbench"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    h = odd / "home"
    spec = make_spec(
        "Linux",
        [("--name", 'mini "2"'), ("--models-dir", str(odd)), ("--broker", BROKER)],
        home=h,
        environ={"PATH": "/usr/bin", "SILICONBENCH_MODELS_DIR": str(odd)},
        program=[str(exe)],
    )
    assert spec.secrets and spec.paths.env_file.is_relative_to(odd)
    unit = h / ".config/systemd/user" / UNIT_NAME
    unit.parent.mkdir(parents=True)
    unit.write_text(systemd.build_unit(spec))
    verify(unit, home)  # a mis-quoted path would be "not executable"
    exe.unlink()  # and the path systemd checks is exactly that one
    r = subprocess.run(["systemd-analyze", "--user", "verify", str(unit)], env=home, capture_output=True, text=True)
    assert r.returncode != 0 and f"{exe}" in r.stderr and "is not executable" in r.stderr, r.stderr


def test_env_file_read_by_systemds_own_parser(tmp_path):
    """systemd's env-file parser (the environment.d generator uses the same one) reads back what we wrote."""
    values = {"A": "x y \" \\ %t # ; 'q'", "B": "redis://:p@ss w0rd@h:6379/0", "C": "  padded  "}
    text = envfile.render(values)
    assert envfile.parse(text) == values
    assert envfile.parse(envfile.render({"D": ""})) == {"D": ""}  # (never written: empty settings are left out)
    assert envfile.parse(envfile.render({"E": "a$b`c"})) == {"E": "a$b`c"}  # systemd: no $ expansion there
    gen = Path("/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator")
    if not gen.exists():
        pytest.skip("systemd's environment.d generator is not installed")
    (tmp_path / "environment.d").mkdir()
    (tmp_path / "environment.d" / "10-sb.conf").write_text(text)
    r = subprocess.run(
        [str(gen)],
        env={"XDG_CONFIG_HOME": str(tmp_path), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 0, r.stderr
    got = envfile.parse(r.stdout)
    assert {k: got.get(k) for k in values} == values
    with pytest.raises(ValueError):
        envfile.render({"A": "two\nlines"})


def test_worker_options_go_after_the_verb(home):
    r = cli("worker", "--name", "x", "install", env=home)
    assert r.returncode == 2 and "options go after the verb" in r.stderr
    r = cli("worker", "install", "--database", DB, env=home)
    assert r.returncode == 2 and "SILICONBENCH_BROKER_URL" in r.stderr
    assert not (Path(home["HOME"]) / ".config").exists()
    r = cli("worker", "--help", env=home)
    assert r.returncode == 0 and "install" in r.stdout and "uninstall" in r.stdout and "--broker" in r.stdout


# -------------------------------------------------------------------------------------- sleep prevention


def stand_in(folder: Path, name: str, log: Path, hold: str) -> None:
    """An executable `name` that records its arguments and then holds like the real one."""
    folder.mkdir(exist_ok=True)
    p = folder / name
    p.write_text(f'#!/bin/sh\necho "$$ $*" >> {log}\n{hold}\n')
    p.chmod(0o755)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")


def test_no_sleep_prevention_here_is_said():
    method, why = sleep_method("Linux")
    if method == "none":  # this container: no logind, or no systemd-inhibit
        assert "systemd-inhibit" in why
        with prevent_sleep("job", system="Linux") as held:
            assert held.method == "none" and held.pid is None
    with prevent_sleep("job", system="Plan9") as held:
        assert held.method == "none" and "Plan9" in held.detail


def test_caffeinate_held_for_the_block_and_released(tmp_path, monkeypatch):
    log = tmp_path / "caffeinate.log"
    stand_in(tmp_path / "bin", "caffeinate", log, 'exec tail --pid="$4" -f /dev/null')  # -w PID is $4
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    with prevent_sleep("siliconbench job x", system="Darwin") as held:
        assert held.method == "caffeinate" and held.pid
        time.sleep(0.3)
        assert alive(held.pid)
        assert log.read_text().split()[1:] == ["-i", "-s", "-w", str(os.getpid())]
    assert not alive(held.pid)


def test_real_job_runs_inside_the_inhibitor(tmp_path, monkeypatch, models_dir):
    """siliconbench.worker.runtime.task._execute holds the assertion around the child job, and only there (noop takes none)."""
    from siliconbench.worker.runtime.spool import Spool
    from siliconbench.worker.runtime.task import WorkerContext, _execute

    log = tmp_path / "inhibit.log"
    # systemd-inhibit [--opts...] CMD...: skip the options, run the command it guards
    stand_in(tmp_path / "bin", "systemd-inhibit", log, 'while [ "${1#--}" != "$1" ]; do shift; done\nexec "$@"')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    assert sleep_method("Linux")[0] == "systemd-inhibit"
    spec = parse_sweep(
        {
            "name": "sleep",
            "models": [SMALL],
            "engines": ["llama.cpp"],
            "repetitions": 1,
            "warmup": 0,
            "workloads": [{"kind": "generate", "prompt_tokens": [16], "gen_tokens": [4], "depth": [0]}],
        }
    )
    job = expand(spec, ModelCatalog(models_dir))[0]
    ctx = WorkerContext(name="t", database_url="", models_dir=models_dir, spool=Spool(tmp_path / "spool"))
    result = _execute(job, ctx)
    assert result.status == "ok", result.error
    calls = [line for line in log.read_text().splitlines() if "--why=probe" not in line]
    assert len(calls) == 1
    pid, *args = calls[0].split()
    assert args[:5] == ["--what=idle:sleep", "--who=siliconbench", "--why=siliconbench", "job", f"{job.job_id}"]
    assert args[-4:] == ["tail", f"--pid={os.getpid()}", "-f", "/dev/null"]
    assert not alive(int(pid))  # released when the job ended
    _execute(job.model_copy(update={"workload": "noop"}), ctx)
    assert len([line for line in log.read_text().splitlines() if "--why=probe" not in line]) == 1


def test_an_embedded_run_holds_the_same_assertion_through_perform_job(tmp_path, monkeypatch, models_dir, sqlite_url):
    """`siliconbench run` and the dashboard's runner go through siliconbench.worker.job.perform.perform_job, as the fleet worker
    does: the job runs inside the inhibitor here too, and an artifact path that leaves the models folder fails."""
    from siliconbench.embedded.run import run_sweep
    from siliconbench.worker.job.perform import perform_job

    log = tmp_path / "inhibit.log"
    stand_in(tmp_path / "bin", "systemd-inhibit", log, 'while [ "${1#--}" != "$1" ]; do shift; done\nexec "$@"')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    spec = parse_sweep(
        {
            "name": "sleep-embedded",
            "models": [SMALL],
            "engines": ["llama.cpp"],
            "repetitions": 1,
            "warmup": 0,
            "workloads": [{"kind": "generate", "prompt_tokens": [16], "gen_tokens": [4]}],
        }
    )
    jobs = expand(spec, ModelCatalog(models_dir))
    done = []
    run_sweep(spec, jobs, database_url=sqlite_url, models_dir=models_dir, on_done=lambda j, r: done.append(r))
    assert [r.status for r in done] == ["ok"], [r.error for r in done]
    calls = [line for line in log.read_text().splitlines() if "--why=probe" not in line]
    assert len(calls) == 1 and f"{jobs[0].job_id}" in calls[0]
    escaping = perform_job(jobs[0].model_copy(update={"artifact": "../../etc/passwd"}), models_dir)
    assert escaping.status == "failed" and "outside the models folder" in escaping.error


# ------------------------------------------------------------------------------------------------ doctor


@pytest.fixture
def fresh_pg():
    """A new, empty PostgreSQL database (URL), dropped afterwards."""
    with new_pg_database("sb_doctor") as url:
        yield url


def lines_of(out: str) -> dict[str, tuple[str, str]]:
    """name -> (status, detail) of each check line."""
    got = {}
    for line in out.splitlines()[1:]:
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[0] in ("ok", "info", "FAIL"):
            got[parts[1]] = (parts[0], parts[2])
    return got


def test_doctor_all_fine_with_real_broker_and_database(home, models_dir, fresh_pg):
    import redis

    try:
        redis.Redis.from_url("redis://127.0.0.1:6379/11", socket_connect_timeout=2).ping()
    except redis.exceptions.ConnectionError as exc:
        pytest.skip(f"Redis unreachable: {exc}")
    env = {
        **home,
        "SILICONBENCH_MODELS_DIR": str(models_dir),
        "SILICONBENCH_BROKER_URL": "redis://127.0.0.1:6379/11",
        "SILICONBENCH_DATABASE_URL": fresh_pg,
    }
    r = cli("doctor", env=env)
    got = lines_of(r.stdout)
    assert r.returncode == 1 and got["database"][0] == "FAIL" and "no siliconbench tables" in got["database"][1]
    assert "fix: run `siliconbench db upgrade`" in r.stdout and r.stdout.rstrip().endswith("1 problem(s): database")
    database.upgrade(fresh_pg)
    r = cli("doctor", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    got = lines_of(r.stdout)
    assert r.stdout.splitlines()[0] == "siliconbench doctor: what a worker on this machine sees"
    assert r.stdout.rstrip().endswith("all fine")
    assert got["host"][0] == "ok" and socket.gethostname() in got["host"][1]
    assert got["llama.cpp"][0] == "ok" and "backend CPU" in got["llama.cpp"][1]
    assert got["mlx"][0] == "ok" and "backend CPU" in got["mlx"][1]
    assert got["metal"] == ("info", "Metal exists only on macOS: llama.cpp runs on CPU, mlx runs on CPU here")
    assert got["models"][0] == "ok" and SMALL in got["models"][1]
    # siliconbench.worker.platform's own report (lost once to a move that made the doctor look for it beside itself)
    assert got["thermal"][0] == "ok" and "platform=Linux" in got["thermal"][1] and "source=sysfs" in got["thermal"][1]
    assert got["broker"] == ("ok", "redis://127.0.0.1:6379/11 answers")
    assert got["database"][0] == "ok" and "schema at" in got["database"][1]
    assert got["service"][0] == "info" and got["sleep"][0] in ("ok", "info") and "thermal" in got
    assert not any(status == "FAIL" for status, _ in got.values())
    assert got["login"][0] == "info" and "not a worker login" in got["login"][1]
    # On the Mac's own worker login (`siliconbench db worker-role mini-1`), doctor says which host it may act as.
    env["SILICONBENCH_DATABASE_URL"] = roles.create_login(fresh_pg, "worker", "sbw_mini_1", host="mini-1").rendered()
    r = cli("doctor", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert lines_of(r.stdout)["login"] == ("ok", "sbw_mini_1, a worker login bound to host 'mini-1'")
    # and whether one more Mac fits in PostgreSQL's connections (each worker connecting directly holds one)
    status, capacity = lines_of(r.stdout)["capacity"]
    limit = int(re.search(r"PostgreSQL allows (\d+) connections", capacity).group(1))
    assert status == "ok" and capacity.startswith("0 host(s) registered") and limit >= 100  # stock: 100
    assert f"room for about {limit - 20} more Mac(s) connecting directly" in capacity
    # the pooled login (migration 0017) is for Macs behind PgBouncer: without SILICONBENCH_DATABASE_POOLED, doctor fails it
    env["SILICONBENCH_DATABASE_URL"] = roles.create_login(fresh_pg, "worker", "sbw_fleet", host="*").rendered()
    r = cli("doctor", env=env)
    assert r.returncode == 1 and lines_of(r.stdout)["login"][0] == "FAIL", r.stdout
    assert "SILICONBENCH_DATABASE_POOLED=1" in r.stdout


def test_doctor_says_what_to_fix(home, models_dir, tmp_path):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now
    secrets = tmp_path / "worker.env"
    envfile.write(secrets, {"SILICONBENCH_BROKER_URL": f"redis://:{SECRET}@127.0.0.1:{port}/0"})
    env = {
        **home,
        "SILICONBENCH_MODELS_DIR": str(tmp_path / "no-models"),
        "SILICONBENCH_ENV_FILE": str(secrets),
        "SILICONBENCH_DATABASE_URL": f"postgresql://sb:{SECRET}@127.0.0.1:{port}/sb",
    }
    r = cli("doctor", env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    got = lines_of(r.stdout)
    assert got["broker"][0] == "FAIL" and got["broker"][1].startswith(f"redis://:***@127.0.0.1:{port}/0 unreachable")
    assert (
        got["database"][0] == "FAIL"
        and f"postgresql+psycopg://sb:***@127.0.0.1:{port}/sb unreachable" in got["database"][1]
    )
    assert got["models"][0] == "FAIL"
    assert "fix: start Redis on the coordinator" in r.stdout and "fix: check host, port, user and password" in r.stdout
    assert "fix: siliconbench models make-tiny" in r.stdout
    assert r.stdout.rstrip().endswith("3 problem(s): models, broker, database")
    assert SECRET not in r.stdout + r.stderr


def test_doctor_gives_up_on_a_silent_server_within_its_timeout(home, models_dir):
    """A port that accepts TCP but never answers (a firewall, a hung server): each check stops at --timeout."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # the kernel completes handshakes; nobody ever reads or writes
    port = silent.getsockname()[1]
    try:
        env = {**home, "SILICONBENCH_MODELS_DIR": str(models_dir)}
        t0 = time.monotonic()
        r = cli(
            "doctor",
            "--timeout",
            "1",
            "--broker",
            f"redis://127.0.0.1:{port}/0",
            "--database",
            f"postgresql://sb@127.0.0.1:{port}/sb",
            env=env,
        )
        took = time.monotonic() - t0
    finally:
        silent.close()
    got = lines_of(r.stdout)
    assert r.returncode == 1 and got["broker"][0] == "FAIL" and got["database"][0] == "FAIL", r.stdout
    assert "within 1 s" in got["broker"][1] and "within 1 s" in got["database"][1]
    assert took < 30


def test_worker_reads_its_secrets_file(home, tmp_path):
    """`siliconbench worker` under launchd gets SILICONBENCH_ENV_FILE, not the URLs: it must load them itself."""
    secrets = tmp_path / "worker.env"
    envfile.write(
        secrets,
        {
            "SILICONBENCH_BROKER_URL": "redis://127.0.0.1:1/0",
            "SILICONBENCH_DATABASE_URL": f"postgresql://sb:{SECRET}@127.0.0.1:1/sb?connect_timeout=2",
        },
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "siliconbench.cli.main", "worker"],
        cwd=ROOT,
        text=True,
        env={**home, "SILICONBENCH_ENV_FILE": str(secrets)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        # past "the fleet needs a broker": it got both URLs from the file, and waits for the unreachable database
        line = proc.stdout.readline()
        while line and "unreachable" not in line:
            line = proc.stdout.readline()
        assert "the database is unreachable" in line and '"127.0.0.1", port 1' in line, line
        assert proc.poll() is None and SECRET not in line
    finally:
        proc.kill()
        rest = proc.communicate(timeout=10)[0]
    assert SECRET not in rest


def test_doctor_darwin_branches_on_this_machine():
    """The Darwin verdicts, from this x86_64 machine's real engines and PATH: no arm64, no Metal, no caffeinate."""
    from siliconbench.worker.runtime.doctor import Status, check_engines, check_host, check_sleep

    host = check_host("Darwin")[0]
    assert host.status is Status.fail and "not native arm64" in host.detail and "native arm64 Python" in host.fix
    metal = [c for c in check_engines("Darwin") if c.name == "metal"][0]
    assert metal.status is Status.fail and "llama.cpp" in metal.detail and "mlx" in metal.detail
    assert "-DGGML_METAL=on" in metal.fix
    if shutil.which("caffeinate") is None:
        sleep = check_sleep("Darwin")[0]
        assert sleep.status is Status.fail and "caffeinate" in sleep.detail
