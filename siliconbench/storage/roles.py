"""Database logins with least privilege (PostgreSQL): a worker's, bound to one host, and the coordinator's.

Migration 0006 creates the two group roles and the rules (grants, row-level security); this module makes
logins that belong to them and tells a running worker which host its login may act as. A Mac gets a worker
login: a stolen or misconfigured one can register, claim and record only as its own host, and can drop,
alter or delete nothing.
"""

from __future__ import annotations

import random
import re
import secrets
import time
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from siliconbench.contract.errors import UserError

from .database import normalize_url, session_scope

WORKER_ROLE, COORDINATOR_ROLE = "siliconbench_worker", "siliconbench_coordinator"
# The host of the pooled worker login (migration 0017): any, named by the connection's application_name.
POOLED_HOST, POOLED_LOGIN = "*", "sbw_fleet"
ROLES = {"worker": WORKER_ROLE, "coordinator": COORDINATOR_ROLE}
LOGIN = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")  # PostgreSQL identifiers we never need to quote
ROLE_RACE_ATTEMPTS = 10


def login_for(host: str, kind: str = "worker") -> str:
    """The default login of a host: sbw_mini_1 for a worker named mini-1 (sbc_ for a coordinator)."""
    return ("sbw_" if kind == "worker" else "sbc_") + re.sub(r"[^a-z0-9_]", "_", host.lower())[:59]


@dataclass(frozen=True)
class Login:
    login: str
    role: str
    host: str | None
    url: URL  # the database URL to hand over, password included

    def rendered(self) -> str:
        return self.url.render_as_string(hide_password=False)


def _literal(value: str) -> str:
    # CREATE ROLE takes no bound parameters; with standard_conforming_strings (on since 9.1) doubling quotes is exact.
    return "'" + value.replace("'", "''") + "'"


def _write_login(url: URL, kind: str, role: str, login: str, password: str, host: str | None) -> None:
    with session_scope(url) as s:
        if not _role_exists(s, role):
            raise UserError(
                "SILICONBENCH_DATABASE_URL", f"role {role} does not exist; run `siliconbench db upgrade` first."
            )
        verb = "ALTER" if _role_exists(s, login) else "CREATE"
        s.execute(text(f"{verb} ROLE {login} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD {_literal(password)}"))
        s.execute(text(f"GRANT {role} TO {login}"))
        if kind == "worker":
            s.execute(text("DELETE FROM worker_logins WHERE login = :l"), {"l": login})
            s.execute(text("INSERT INTO worker_logins (login, host) VALUES (:l, :h)"), {"l": login, "h": host})


def _lost_role_race(exc: DBAPIError) -> bool:
    """Roles are the server's, not one database's: two callers making or re-keying one login at once (two
    `fleet add-worker`s, or databases of one server) collide in its catalog. The loser's transaction rolled back
    whole, so it is simply tried again and the last one wins."""
    state = getattr(exc.orig, "sqlstate", None)
    return state in ("42710", "23505") or (state == "XX000" and "concurrently" in str(exc.orig))


def _role_exists(session: Session, name: str) -> bool:
    return session.execute(text("SELECT 1 FROM pg_roles WHERE rolname = :r"), {"r": name}).first() is not None


def create_login(
    owner_url: str | URL,
    kind: str,
    login: str,
    *,
    host: str | None = None,
    password: str | None = None,
    address: str | None = None,
) -> Login:
    """Create (or re-key) ``login`` as a member of the ``kind`` role; a worker login is bound to ``host``.

    Run with the owner's URL (migrations and roles are the owner's business). Returns the URL to give the
    machine: the owner's, with this login, the password, and ``address`` as the server's host if given.
    """
    if kind not in ROLES:
        raise UserError("role", f"unknown role {kind!r}.", list(ROLES))
    if not LOGIN.match(login):
        raise UserError(
            "--login",
            f"{login!r} is not a plain PostgreSQL name: lower-case letters, digits and "
            "underscores, at most 63, not starting with a digit.",
        )
    if kind == "worker" and not host:
        raise UserError("host", "a worker login is bound to the host it runs as; name it.")
    url = normalize_url(owner_url)
    if url.get_backend_name() != "postgresql":
        raise UserError(
            "SILICONBENCH_DATABASE_URL",
            f"logins are PostgreSQL's; {url.get_backend_name()} has none (the embedded SQLite file needs no roles).",
        )
    password = password or secrets.token_urlsafe(24)
    role = ROLES[kind]
    for attempt in range(ROLE_RACE_ATTEMPTS):
        try:
            _write_login(url, kind, role, login, password, host)
            break
        except DBAPIError as exc:
            if not _lost_role_race(exc) or attempt == ROLE_RACE_ATTEMPTS - 1:
                raise
            time.sleep(random.uniform(0, 0.05 * (attempt + 1)))  # apart, so the same two do not collide again
    given = url.set(username=login, password=password, host=address or url.host)
    return Login(login=login, role=role, host=host, url=given)


@dataclass(frozen=True)
class Identity:
    login: str
    worker_role: bool  # a member of siliconbench_worker (a superuser counts as every role's member: not here)
    host: str | None  # the host bound to this login in this database (worker_logins)


def identity(session: Session) -> Identity | None:
    """Who this session is, as the rules see it; None on SQLite (no logins)."""
    if session.get_bind().dialect.name != "postgresql":
        return None
    row = session.execute(
        text(
            "SELECT current_user AS login, "
            "EXISTS (SELECT 1 FROM pg_roles r WHERE r.rolname = :role AND pg_has_role(current_user, r.oid, 'MEMBER')) "
            "AND NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS worker_role, "
            "(SELECT host FROM worker_logins WHERE login = current_user) AS host"
        ),
        {"role": WORKER_ROLE},
    ).one()
    return Identity(row.login, bool(row.worker_role), row.host)


def check_worker_name(session: Session, name: str) -> str | None:
    """Raise UserError if this login may not act as host ``name``; a warning line if it is all-powerful."""
    who = identity(session)
    if who is None:
        return None
    if who.worker_role and who.host is None:
        raise UserError(
            "--database",
            f"the login {who.login} is a worker login, but no host is bound to it in this "
            "database; on the coordinator run `siliconbench db worker-role HOST`.",
        )
    if who.host == POOLED_HOST:
        if session.execute(text("SELECT current_setting('application_name')")).scalar() != name:
            raise UserError(
                "--database",
                f"the login {who.login} is the fleet's pooled worker login: it acts as the host its connection's "
                f"application_name names, and this connection's is not {name!r} (`siliconbench worker` sets it).",
            )
        return None
    if who.host is not None and who.host != name:
        raise UserError(
            "--name",
            f"the database login {who.login} may act only as host {who.host!r}, not {name!r}; "
            f"start the worker with --name {who.host}.",
        )
    if not who.worker_role:
        return (
            f"worker {name} connects as {who.login}, which is not a worker login and may change every table; "
            f"give this machine its own: `siliconbench db worker-role {name}` on the coordinator."
        )
    return None


def refused_by_rules(err: BaseException) -> bool:
    """A write the rules refused (SQLSTATE 42501): a worker login writing for a job another worker holds now."""
    return getattr(getattr(err, "orig", None), "sqlstate", None) == "42501"
