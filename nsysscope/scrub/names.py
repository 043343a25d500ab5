"""User and host names: which ones the scrub searches for in every text, and how (a name
standing as a word, joined into others, in any case; in the names the analysis reads, only as
written). The policy: :mod:`.policy`, ``user`` / ``host``."""

from __future__ import annotations

import re
from collections.abc import Iterable

from .paths import home_names

#: (pattern, placeholder, kind, name) of each user and host name to replace
WordPatterns = list[tuple[re.Pattern[str], str, str, str]]
#: ``(name, value)`` rows of a ``META_DATA_*`` or ``TARGET_INFO_SYSTEM_ENV`` table
Meta = list[tuple[str, str]]
#: what a user or host name becomes
USER_PLACEHOLDER = "user"
HOST_PLACEHOLDER = "host"
#: not identifying (a cloud image's or a container's default user), or Windows' own folders
#: under ``C:\Users``: replaced in their own fields only, not searched for in every text
GENERIC_USERS = frozenset({"", "root", "user", "nobody", "ubuntu", "ec2-user", "admin",
                           "jovyan", "runner", "test", "ci", "build", "jenkins", "docker",
                           "Public", "Default", "All Users", "Default User"})
GENERIC_HOSTS = frozenset({"", "host", "localhost", "Local (CLI)", "main", "master", "worker",
                           "node", "server", "gpu", "dev"})


_GENERIC = frozenset(n.lower() for n in GENERIC_USERS | GENERIC_HOSTS)


def generic(name: str) -> bool:
    """Whether a user or host name is one of the generic ones, in any case (``Root``,
    ``ADMIN``: they are matched in any case too)."""
    return name.strip().lower() in _GENERIC


def host_names(host: str) -> set[str]:
    """A host's names to search for: itself and, for a fully qualified one
    (``node7.corp.example.com``), its short name and its site's domain (not a bare top-level
    one)."""
    names = {host}
    if "." in host and not re.fullmatch(r"[\d.]+", host):
        name, domain = host.split(".", 1)
        names.add(name)
        if "." in domain:
            names.add(domain)
    return names


def program_word_pattern(name: str) -> re.Pattern[str]:
    """Where the user or host ``name`` recurs in a name the analysis reads (an NVTX range, a
    kernel, a CUDA call, a Python sample's file or function): as a word of its own and as
    written only, so that identifiers stay whole (``launch_clamp_scalar``, ``cuda-EvtHandlr``,
    ``engine_under_test``)."""
    before = "" if "." in name else "."
    return re.compile(rf"(?<![A-Za-z0-9_\-{before}])" + re.escape(name) +
                      r"(?![A-Za-z0-9_\-])")


def word_pattern(name: str) -> re.Pattern[str]:
    """Where the user or host ``name`` recurs in a text. A name of four characters or more
    also inside words joined by ``_`` or ``-`` (``alice_runs``, ``exp-alice``); a shorter one
    only as a word of its own, or before ``_<digits>`` (``{host}_{pid}``, the worker names
    of torch's tensorboard_trace_handler), since it is more often part of another name. A
    dotted name (a host's domain) also after a dot (``nfs.corp.example.com``). In any case:
    host names are DNS names and user names are written in capitals too (``MRIVERA``)."""
    dotted = "." in name
    if len(name) >= 4:
        return re.compile(r"(?<![A-Za-z0-9" + ("" if dotted else ".") + "])" + re.escape(name) +
                          r"(?![A-Za-z0-9]" + (r"|\.[A-Za-z0-9])" if dotted else ")"), re.I)
    before = "" if dotted else "."
    return re.compile(rf"(?<![A-Za-z0-9_\-{before}])" + re.escape(name) +
                      r"(?![A-Za-z0-9\-]|_(?!\d))", re.I)


def users_and_hosts(meta: Meta, sysenv: Meta, env: dict[str, str], paths: set[str],
                    homes: Iterable[str] = ()) -> tuple[set[str], set[str]]:
    """The user and host names an export gives away: its user and host fields (``meta``:
    ``META_DATA_*`` rows, ``sysenv``: ``TARGET_INFO_SYSTEM_ENV`` rows), the recorded
    environment, the home folders in ``paths`` and the users of other ``homes`` (``~NAME/``
    in a text); a host's short name and domain too."""
    users: set[str] = set()
    hosts: set[str] = set()
    for n, v in meta:
        if n.endswith("USER_NAME") or n == "EXPORT_USER":
            users.add(v)
        elif n in ("EXPORT_HOST", "DEVICE_DISPLAY_NAME"):
            hosts.add(v)
    for n, v in sysenv:
        if n in ("Hostname", "HostName"):
            hosts.add(v)
    for k in ("USER", "LOGNAME", "USERNAME"):
        if k in env:
            users.add(env[k])
    if "HOSTNAME" in env:
        hosts.add(env["HOSTNAME"])
    for p in list(paths) + [env.get("HOME", "")]:
        users.update(home_names(p))
    users.update(homes)
    users -= {USER_PLACEHOLDER, ""}
    hosts = {n for h in hosts if not generic(h) for n in host_names(h) if not generic(n)}
    return users, hosts


def word_patterns(users: set[str], hosts: set[str],
                  program_words: set[str]) -> tuple[WordPatterns, WordPatterns]:
    """User and host names to replace where they recur: in any text (:func:`word_pattern`),
    and in the names the analysis reads (:func:`program_word_pattern`), where a name that is
    itself one of the program's words (a whole range name, or its first word: a user named
    ``sample``, ``step``) is not searched for: it would rename the program's phases."""
    out: WordPatterns = []
    program: WordPatterns = []
    named = [(n, USER_PLACEHOLDER, "user") for n in users] + \
        [(n, HOST_PLACEHOLDER, "host") for n in hosts]
    # the longest first, hosts and users alike: a user 'alice' must not eat into the host
    # 'alice-ws.local' before the host's own pattern sees it
    for name, rep, kind in sorted(named, key=lambda x: (-len(x[0]), x[2], x[0])):
        if len(name) < 2 or generic(name):
            continue
        out.append((word_pattern(name), rep, kind, name))
        if name.lower() not in program_words:
            program.append((program_word_pattern(name), rep, kind, name))
    return out, program
