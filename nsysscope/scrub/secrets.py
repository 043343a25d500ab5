"""Secrets and addresses inside any text of a trace, for both scrubs (nsys exports and
torch.profiler traces).

A server's command line and its NVTX or ``record_function`` names can carry what no trace
should: ``--api-key=sk-...`` (vLLM and sglang take one), a Hugging Face or GitHub token, a
database URL with its password, ``AWS_SECRET_ACCESS_KEY=...`` in a logged string, the address
of the machine a rank rendezvoused with. The environment rules of :mod:`.policy` see only a
text that *is* an environment variable; these find one anywhere in a text and replace just it:

``secret``
    a PEM private key (``-----BEGIN ... PRIVATE KEY-----`` to its ``END`` line, or to the end
    of the text where it was cut), well-known token formats (Hugging Face ``hf_...``, GitHub
    ``ghp_...``/``github_pat_...``, GitLab ``glpat-...``, OpenAI/Anthropic ``sk-...``, Stripe
    ``sk_live_...``, AWS ``AKIA...``/``ASIA...``, Google ``AIza...``, Slack ``xox?-...`` and
    webhook URLs, SendGrid ``SG....``, npm ``npm_...``, PyPI ``pypi-...``, DigitalOcean
    ``dop_v1_...``, a JWT), the value of a secret-named variable or option
    (``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``, ``*API_KEY*``, ``*ACCESS_KEY*``,
    ``*PRIVATE_KEY*``, ``*CREDENTIAL*``: ``NAME=value``, ``--api-key=value``,
    ``--api-key value``, ``"api_key": "value"`` in JSON, ``HF_TOKEN: value`` for a name in
    capitals), the password of a URL (``scheme://user:password@host``, the user possibly
    empty) and an HTTP ``Basic`` credential, each becoming ``<secret>``;
``email``
    an e-mail address (its domain ending in a common top-level domain, not a file's extension:
    ``model@best.pt``, ``Optimizer@Adam.step`` stay), becoming ``<email>``;
``ip``
    an IPv4 address (each part 0-255, not inside a longer dotted number) other than
    ``0.0.0.0``, ``127.x.x.x`` and ``255.x.x.x``, becoming ``<ip>``: where it is one (before a
    port, after ``=``, ``@`` or ``/``, after an interface in NCCL's ``eth0:10.1.2.3<0>``, the
    value of an option that names an address (``--master-addr 10.1.2.3``, on an argument row
    of its own: :func:`address_option`), or in a text that names an address or a network
    (``inet``, ``brd``, ``rendezvous``, ``connect``, ``port``, ``eth0``...)), not a four-part
    version number (``cudnn 9.1.0.70``, alone too). Also an IPv6 address
    anywhere (three groups or more, shortened with ``::`` or all eight, one of three hex
    digits or more, and a decimal digit: not a time or C++ scopes such as ``at::native``),
    whose link-local form holds the card's MAC address.
``machine_id``
    a network card's hardware address: a MAC address (six hex pairs, ``:`` or ``-``
    separated) or an InfiniBand one (up to 20 pairs), becoming ``<mac>``, or an InfiniBand
    GUID (``0c42:a103:0065:b0d0``), becoming ``<guid>``; in a text that names a card
    (``mac``, ``ether``, ``guid``, ``eth0``...), also 12 or 16 hex digits unseparated
    (``"MacAddress":"0C42A165B0D0"``, ``0x0c42a1030065b0d0``). Left as they are: all zeros;
    unseparated digits without a hex letter (a count, a time); and, unless the text names a
    card, runs without both a decimal digit and a hex letter (dates such as
    ``24-01-15-10-30-00``, ``dead:beef:cafe:babe``). nsys records the host's network cards in
    ``TARGET_INFO_SYSTEM_ENV`` (``NicInfo``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

SECRET = "<secret>"
IP = "<ip>"

#: a name that says its value is a secret: one of its parts (split at ``_``, ``-`` or ``.``)
#: is one of these words (``HF_TOKEN``, ``hf-token``, ``AWS_ACCESS_KEY_ID``; not
#: ``max_tokens`` or ``author``)
_WORD = r"(?:TOKEN|SECRET|PASSWORD|PASSWD|PASS|PASSPHRASE|API[_\-]?KEY|ACCESS[_\-]?KEY|" \
        r"PRIVATE[_\-]?KEY|SECRET[_\-]?KEY|CREDENTIALS?|AUTH)"
SECRET_NAME = r"(?:[A-Za-z0-9]+[_\-.])*" + _WORD + r"(?:[_\-.][A-Za-z0-9]+)*"
_TOKENS = re.compile(
    r"(?<![\w\-])(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|"
    r"gl(?:pat|dt|rt|ptt|cbt|oas|ft|imt|agent|wt|soat)-[A-Za-z0-9_\-]{20,}|"
    r"sk-[A-Za-z0-9_\-]{20,}|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}|(?:AKIA|ASIA)[0-9A-Z]{16}|"
    r"AIza[0-9A-Za-z_\-]{35}|xox[abeoprs]-[A-Za-z0-9\-]{10,}|xapp-[A-Za-z0-9\-]{10,}|"
    r"SG\.[\w\-]{16,}\.[\w\-]{16,}|npm_[A-Za-z0-9]{36}|pypi-[A-Za-z0-9_\-]{50,}|"
    r"dop_v1_[a-f0-9]{64}|"
    r"eyJ[\w\-]{8,}\.eyJ[\w\-]{8,}\.[\w\-]{8,})(?![\w\-])|(?<=Bearer )[\w\-.~+/=]{8,}|"
    r"(?<=Basic )[A-Za-z0-9+/]{8,}={0,2}|"
    r"(?<=hooks\.slack\.com/)(?:services|workflows|triggers)/[\w/\-]{16,}")
#: a PEM private key (RSA, EC, OpenSSH, PKCS#8, encrypted, PGP), to its END line or, cut
#: short (a 256-character name), to the end of the text
_PEM = re.compile(r"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----.*?"
                  r"(?:-----END \1-----|\Z)", re.S)
#: NAME=value or --name=value, and --name value (an option: the value follows a space)
_NAMED = re.compile(r"(?i)(?<![\w\-.])((?:--?)?" + SECRET_NAME + r")(?![\w])(=)([^\s\"',;&]+)|"
                    r"(?<![\w\-.])(--?" + SECRET_NAME + r")(?![\w])(\s+)(?!-)([^\s\"',;&]+)")
#: ``"api_key": "value"`` (JSON, the name quoted) and ``HF_TOKEN: value`` (a variable's
#: name in capitals: not ``token: 42`` in a range name)
_COLON_NAMED = re.compile(r"(?i)(?<=\")(" + SECRET_NAME + r")(\"\s*:\s*\")([^\"]+)(?=\")|"
                          r"(?-i:(?<![\w\-.])((?:[A-Z0-9]+_)*" + _WORD + r"(?:_[A-Z0-9]+)*)"
                          r"(?![\w\-])(:[ \t]*)(?![<\s])([^\s\"',;&]+))")
_URL_PASSWORD = re.compile(r"(?<=://)([^/\s:@]*):([^/\s@]+)@")  # the user may be empty
EMAIL = "<email>"
#: an e-mail address: a person's name (``bob.smith@corp.example.com``, a commit's author, a
#: ``--user`` option); its domain ends in a common top-level domain, or an intranet's, not in
#: what a file's extension or a method can be (``ckpt@step.pt``, ``Optimizer@Adam.step``)
_TLDS = ("com|org|net|edu|gov|mil|int|io|ai|dev|app|cloud|info|biz|tech|email|me|us|uk|de|fr|"
         "jp|cn|kr|in|ca|au|eu|ch|nl|se|no|fi|dk|it|es|ru|br|il|tw|sg|hk|at|be|cz|ie|nz|za|"
         "local|internal|lan|corp")
_EMAIL = re.compile(r"(?<![\w.%+\-])[\w.%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*"
                    rf"\.(?i:{_TLDS})(?![\w\-])")
_IPV4 = r"(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)"
#: an address, not a version number: before a port, after '=', '@' or '/', or anywhere in a
#: text that names an address (``--master-addr 10.0.0.7``, ``host 10.1.2.3``)
_IP_HERE = re.compile(r"(?<![\d.])" + _IPV4 + r"(?=:\d)|(?<=[=@/])" + _IPV4 + r"(?![\d.]*\d)|"
                      r"(?<=\w:)" + _IPV4 + r"(?=<\d+>)")  # NCCL's interface:address<n>
_IP_ANYWHERE = re.compile(r"(?<![\d.])" + _IPV4 + r"(?![\d.]*\d)")
_NAMES_AN_ADDRESS = re.compile(r"(?i)addr|host|\bip\b|endpoint|master|server|url|peer|\binet\b|"
                               r"\bbrd\b|rendezvous|connect|\bport\b|\bbind|listen|socket|"
                               r"\b(?:tcp|udp|nccl|gloo)\b|\b(?:eth|ib|bond|en[ops])\d")
_HARMLESS_IP = re.compile(r"0\.0\.0\.0|127\.|255\.")
MAC = "<mac>"
GUID = "<guid>"
_HEX = "[0-9A-Fa-f]"
#: six hex pairs (an Ethernet MAC), or up to 20 with colons (an InfiniBand hardware address,
#: which ends in the port GUID); or 12 hex digits, unseparated (counted where a text names a
#: card only)
_MAC = re.compile(rf"(?<![0-9A-Fa-f:\-])(?:(?:{_HEX}{{2}}:){{5,19}}|(?:{_HEX}{{2}}-){{5}})"
                  rf"{_HEX}{{2}}(?![0-9A-Fa-f:\-])|(?<![\w]){_HEX}{{12}}(?![\w])")
#: four groups of four hex digits; or 16 hex digits, ``0x`` or not (where a text names a card)
_GUID = re.compile(rf"(?<![0-9A-Fa-f:])(?:{_HEX}{{4}}:){{3}}{_HEX}{{4}}(?![0-9A-Fa-f:])|"
                   rf"(?<![\w])(?:0x)?{_HEX}{{16}}(?![\w])")
_ZERO = re.compile(r"(?:0x)?[0:\-]+")
#: a text that says it holds a network card's address (whole words: not "machine" or
#: "NVLink"): there a hardware address of decimal digits only (which a date or a run of
#: numbers also is) counts, and so do the unseparated forms
_NAMES_HARDWARE = re.compile(
    r"(?i)\bmac(?:[\s_-]?addr(?:ess)?)?\b|\bether\b|(?<!\w)link/(?:ether|infiniband)|\bhwaddr\b|"
    r"guid|\bnic(?:s|info)?\b|"
    r"infiniband|\bib\d|\beth\d|\ben[ops]\d")
#: not inside a word or a dotted name; but after an interface name and a colon (NCCL's
#: ``eth1:fe80::...``, ``mlx5_0:...``: what follows must still pass :func:`redact_secrets`'
#: checks of an address)
_IPV6 = re.compile(rf"(?:(?<![\w:.])|(?<=\w:))"
                   rf"(?:{_HEX}{{1,4}}::?){{1,7}}(?:{_HEX}{{1,4}})?(?![\w:])")
# cheap first looks: most texts of a trace (kernel and range names) hold none of these
_DIGIT_DOT = re.compile(r"\d\.\d")
_MAYBE_TOKEN = re.compile(r"hf_|gh[pousr]_|github_pat_|gl[a-z]{1,5}-|sk-|[sr]k_|AKIA|ASIA|"
                          r"AIza|xox|xapp-|SG\.|npm_|pypi-|dop_v1_|eyJ|Bearer |Basic |"
                          r"hooks\.slack")
_MAYBE_NAMED = re.compile(r"(?i)token|secret|pass|key|credential|auth")
_MAYBE_HW = re.compile(rf"[:\-](?:{_HEX}{{2}}[:\-]|{_HEX}{{4}}:{_HEX}{{4}}:)|{_HEX}{{12}}")
_MAYBE_IPV6 = re.compile(rf":(?::?{_HEX}{{1,4}}:|{_HEX}{{1,4}}::)")


@functools.lru_cache(maxsize=1 << 16)  # a trace's texts repeat (range names, per row)
def redact_secrets(text: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """``text`` with its secrets and IP addresses replaced, and what was found as (kind,
    excerpt) pairs, the excerpt saying what it was without repeating it."""
    found: list[tuple[str, str]] = []

    def token(m: re.Match[str]) -> str:
        found.append(("secret", m.group(0)[:3] + "…"))
        return SECRET

    def named(m: re.Match[str]) -> str:
        name, sep, value = m.group(1, 2, 3) if m.group(1) else m.group(4, 5, 6)
        if value == SECRET:
            return m.group(0)
        found.append(("secret", f"{name}{sep.strip() or ' '}…"))
        return f"{name}{sep}{SECRET}"

    def password(m: re.Match[str]) -> str:
        if m.group(2) == SECRET:
            return m.group(0)
        found.append(("secret", "://…:…@"))
        return f"{m.group(1)}:{SECRET}@"

    ip = _ipv4_replacer(found)

    def hardware(m: re.Match[str]) -> str:
        a = m.group(0)
        digits = a[2:] if a.startswith("0x") else a
        mixed = any(c.isdigit() for c in digits) and any(c in "abcdefABCDEF" for c in digits)
        separated = ":" in a or "-" in a
        if _ZERO.fullmatch(a) or (not card and not (separated and mixed)) or \
                (not separated and not mixed and not a.startswith("0x")):
            return a  # all zeros; a hash, a pointer, a date, a run of numbers or a word of hex
            # letters where no card is named; a plain number anywhere
        found.append(("machine_id", a[:5] + "…"))
        return GUID if m.re is _GUID else MAC

    def email(m: re.Match[str]) -> str:
        found.append(("email", m.group(0)[:1] + "…@…"))
        return EMAIL

    def ipv6(m: re.Match[str]) -> str:
        a = m.group(0)
        groups = [g for g in a.split(":") if g]
        if (a.count("::") != 1 and a.count(":") != 7) or len(groups) < 3 or \
                not any(len(g) >= 3 for g in groups) or not any(c.isdigit() for c in a):
            return a  # a time, a ratio, C++ scopes of hex letters, a short prefix
        found.append(("ip", a.split(":", 1)[0] + ":…"))
        return IP

    def pem(m: re.Match[str]) -> str:
        found.append(("secret", f"-----BEGIN {m.group(1)}…"))
        return SECRET

    out = _PEM.sub(pem, text) if "-----BEGIN " in text else text
    if _MAYBE_HW.search(out):  # the naming words are looked for only then (they cost more)
        card = _NAMES_HARDWARE.search(text) is not None
        out = _GUID.sub(hardware, _MAC.sub(hardware, out))
    if _MAYBE_IPV6.search(out):
        out = _IPV6.sub(ipv6, out)
    if "." in out and _DIGIT_DOT.search(out):
        out = (_IP_ANYWHERE if _NAMES_AN_ADDRESS.search(out) else _IP_HERE).sub(ip, out)
    if _MAYBE_TOKEN.search(out):
        out = _TOKENS.sub(token, out)
    if _MAYBE_NAMED.search(out):
        out = _COLON_NAMED.sub(named, _NAMED.sub(named, out))
    if "://" in out:
        out = _URL_PASSWORD.sub(password, out)
    if "@" in out:  # after the URL's password: not ``pw@host`` for an address
        out = _EMAIL.sub(email, out)
    return out, tuple(found)


def address_option(arg: str) -> bool:
    """Whether a command-line argument is an option that names an address (``--master-addr``,
    ``--host``, ``--dist-init-addr``): its value, the next argument, is one however it reads
    (``10.42.17.5`` alone would pass for a version number)."""
    return re.fullmatch(r"--?[A-Za-z][\w.\-]*", arg) is not None and \
        _NAMES_AN_ADDRESS.search(arg) is not None


def redact_addresses(text: str) -> tuple[str, list[tuple[str, str]]]:
    """``text`` with each IPv4 address in it replaced (the value of :func:`address_option`),
    and what was found."""
    found: list[tuple[str, str]] = []
    return _IP_ANYWHERE.sub(_ipv4_replacer(found), text), found


def _ipv4_replacer(found: list[tuple[str, str]]) -> Callable[[re.Match[str]], str]:
    """What an IPv4 address matched becomes (``<ip>``, unless harmless: ``127.0.0.1``...),
    noting each one replaced in ``found``."""
    def ip(m: re.Match[str]) -> str:
        if _HARMLESS_IP.match(m.group(0)):
            return m.group(0)
        found.append(("ip", m.group(0).split(".", 1)[0] + ".…"))
        return IP
    return ip


def secret_option(arg: str) -> bool:
    """Whether a command-line argument is a secret-named option whose value is the next
    argument (``--api-key``, ``--hf-token``): nsys records each argument on a row of its own."""
    return bool(re.fullmatch(r"(?i)--?" + SECRET_NAME, arg))
