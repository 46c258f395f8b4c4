"""The worker as a systemd user service (Linux): the unit (pure) and systemctl --user.

KillMode=mixed: SIGTERM goes to the worker alone, which finishes its running job (Celery's warm
shutdown) and exits; the default (control-group) would also signal the job's child process, which
shares the worker's cgroup, and lose the job. SIGKILL for everything left after TimeoutStopSec.
No CPUQuota=, CPUWeight=, Nice= or IOSchedulingClass=: a throttled worker skews every figure.
To start at boot without a login: ``loginctl enable-linger $USER``.
"""

from __future__ import annotations

import shutil
import subprocess

from siliconbench.worker.service.spec import UNIT_NAME, ServiceError, ServiceSpec

RESTART_SEC = 10  # as launchd's ThrottleInterval: a crash-looping worker retries every 10 s, forever
_PLAIN = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@")


def _word(value: str, *, exec_line: bool) -> str:
    """One word of a unit setting: % specifiers (and $ variables on Exec lines) made literal, quoted if needed."""
    if any(c in value for c in "\n\r\0"):
        raise ServiceError(f"a newline or NUL cannot go into a systemd unit: {value!r}")
    value = value.replace("%", "%%")
    if exec_line:
        value = value.replace("$", "$$")
    if value and set(value) <= _PLAIN:
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _path(value: str) -> str:
    """A path setting (WorkingDirectory=, EnvironmentFile=): taken as is, no quoting; only % specifiers escaped."""
    if any(c in value for c in "\n\r\0"):
        raise ServiceError(f"a newline or NUL cannot go into a systemd unit: {value!r}")
    return value.replace("%", "%%")


def build_unit(spec: ServiceSpec) -> str:
    """The unit file's text for ``spec``."""
    env = "\n".join(f"Environment={_word(f'{k}={v}', exec_line=False)}" for k, v in spec.environment.items())
    env_file = f"EnvironmentFile={_path(str(spec.paths.env_file))}\n" if spec.secrets else ""
    # The program is taken literally (no $ substitution there); its arguments get $VAR substitution.
    exec_start = [_word(spec.program[0], exec_line=False)] + [_word(a, exec_line=True) for a in spec.program[1:]]
    return (
        "# Written by `siliconbench worker install`; `siliconbench worker uninstall` removes it.\n"
        "[Unit]\n"
        "Description=siliconbench worker (benchmark jobs from the fleet's broker)\n"
        "\n"
        "[Service]\n"
        "Type=exec\n"
        f"ExecStart={' '.join(exec_start)}\n"
        f"WorkingDirectory={_path(str(spec.paths.working_dir))}\n"
        f"{env}\n{env_file}"
        "Restart=always\n"
        f"RestartSec={RESTART_SEC}\n"
        "KillSignal=SIGTERM\n"
        "KillMode=mixed\n"
        f"TimeoutStopSec={spec.stop_timeout_s}\n"
        "# No CPUQuota=/CPUWeight=/Nice=/IOSchedulingClass=: benchmarks must not be throttled.\n"
        "\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


def render(spec: ServiceSpec) -> bytes:
    return build_unit(spec).encode()


def _systemctl(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(["systemctl", "--user", *args], capture_output=True, text=True, timeout=timeout_s)


def user_manager() -> tuple[bool, str]:
    """Whether a systemd user manager answers here, and why not."""
    if shutil.which("systemctl") is None:
        return False, "systemctl is not installed"
    try:
        r = _systemctl("show-environment", timeout_s=10)
    except subprocess.TimeoutExpired:
        return False, "systemctl --user did not answer within 10 s"
    if r.returncode == 0:
        return True, ""
    said = (r.stderr or r.stdout).strip().splitlines()
    return False, said[-1] if said else f"systemctl --user exited {r.returncode}"


def load(spec: ServiceSpec) -> list[str]:
    ok, why = user_manager()
    commands = f"systemctl --user daemon-reload && systemctl --user enable --now {UNIT_NAME}"
    if not ok:
        return [
            f"no systemd user manager here ({why}): the unit is written but not started.",
            f"Where one runs (a login session, or after `loginctl enable-linger $USER`): {commands}",
        ]
    for args in (("daemon-reload",), ("enable", UNIT_NAME), ("restart", UNIT_NAME)):
        # restart, not start: a reinstall must pick up the new unit (waits for a running job to finish).
        r = _systemctl(*args, timeout_s=spec.stop_timeout_s + 60)
        if r.returncode != 0:
            said = (r.stderr or r.stdout).strip()
            raise ServiceError(f"`systemctl --user {' '.join(args)}` failed ({r.returncode}): {said}")
    return [
        f"enabled and started {UNIT_NAME} (systemctl --user status {UNIT_NAME}; logs: journalctl --user -u {UNIT_NAME})"
    ]


def unload(stop_timeout_s: float) -> list[str]:
    ok, why = user_manager()
    if not ok:
        return [f"no systemd user manager here ({why}): nothing to stop."]
    r = _systemctl("disable", "--now", UNIT_NAME, timeout_s=stop_timeout_s + 60)
    if r.returncode != 0:
        return [f"{UNIT_NAME} was not enabled ({(r.stderr or r.stdout).strip() or r.returncode})"]
    return [f"stopped and disabled {UNIT_NAME} (after its running job finished)"]


def forget() -> None:
    """After the unit file is removed: let the manager drop it."""
    if user_manager()[0]:
        _systemctl("daemon-reload")
