"""Secrets where the scrub did not look (issue 52, item 7), planted in the real case-1 export
with ``sqlite3`` and in the real case-1 torch.profiler capture by editing its JSON: a trigger
holding a database URL with its password, a view holding an e-mail address, a table, column
and index named after the user, a table whose SQL holds a token, a PEM private key and the
common token shapes in range names. ``scrub --check`` must flag each, and the scrubbed copy
hold none of them (its bytes searched) while its analysis stays the same. The old scrub left
every schema object, the PEM key and the GitLab, Google, Stripe, Slack-webhook, SendGrid,
npm, PyPI and DigitalOcean tokens, and its check called the copy clean."""

from __future__ import annotations

import gzip
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from nsysscope import analyze, load
from nsysscope.scrub import find_leaks
from nsysscope.trace import resolve

ROOT = Path(__file__).resolve().parents[2]
KINETO_CASE1 = ROOT / "sample_traces" / "kineto" / "h200_kineto_case1_60.pt.trace.json.gz"
USER = "alicesmith"
PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAplantedKeyBodyZ9xQ\n"
       "-----END RSA PRIVATE KEY-----")
#: one of each token shape, made up (the shapes real ones have)
TOKENS = {
    "gitlab": "glpat-Zq8PlantedGitLabTok3n",
    "github": "ghp_PlantedGitHubToken0123456789ab",
    "aws": "ASIAPLANTEDAWSKEY123",
    "google": "AIzaSyPlantedGoogleApiKey0123456789abcd",
    "stripe": "sk_live_PlantedStripeKey0123",
    "slack": "xoxb-123456789012-PlantedSlackBot",
    "slack_webhook": "https://hooks.slack.com/services/T0PLANTED/B0PLANTED/PlantedWebhookXyz",
    "sendgrid": "SG.PlantedSendGridId1.PlantedSendGridSecretPart2",
    "npm": "npm_PlantedNpmToken0123456789abcdefghijk",
    "pypi": "pypi-AgEIcHlwaS5vcmcPlantedPyPiToken0123456789abcdefghijklmnopq",
    "digitalocean": "dop_v1_" + "ab12" * 16,
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.PlantedJwtSignature",
}
#: what must be in no output: the values, not the shapes' prefixes
PLANTED = ["hunter2", "alice.smith@corp.example.com", USER, "plantedKeyBody",
           *[t.split("-", 1)[-1].split("_")[-1][-12:] for t in TOKENS.values()]]


def scrub(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nsysscope", "scrub", *map(str, args)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)


@pytest.fixture(scope="module")
def hostile_export(sample_path, tmp_path_factory):
    dst = tmp_path_factory.mktemp("scrub") / "hostile.sqlite"
    dst.write_bytes(resolve(sample_path("case1")).read_bytes())
    with sqlite3.connect(dst) as c:
        c.execute("UPDATE META_DATA_EXPORT SET value = ? WHERE name = 'EXPORT_USER'", (USER,))
        c.execute("UPDATE META_DATA_CAPTURE SET value = ? WHERE name LIKE '%USER_NAME'",
                  (USER,))
        c.executescript(f"""
            CREATE TRIGGER audit AFTER INSERT ON StringIds BEGIN
                SELECT 'postgres://u:hunter2@h/db'; END;
            CREATE VIEW contacts AS SELECT 'alice.smith@corp.example.com' AS who;
            CREATE TABLE {USER}_notes ({USER}_col TEXT, n INTEGER);
            CREATE INDEX idx_{USER}_notes ON {USER}_notes(n);
            CREATE TABLE extra (x TEXT DEFAULT '{TOKENS["gitlab"]}');
        """)
        sid = c.execute("SELECT max(id) FROM StringIds").fetchone()[0] + 1
        texts = [f"key {PEM}", *(f"{k} {t}" for k, t in TOKENS.items())]
        c.executemany("INSERT INTO StringIds VALUES (?, ?)",
                      [(sid + i, t) for i, t in enumerate(texts)])
        rows = c.execute("SELECT rowid FROM NVTX_EVENTS WHERE text = 'schedule' "
                         f"LIMIT {len(texts)}").fetchall()
        c.executemany("UPDATE NVTX_EVENTS SET text = NULL, textId = ? WHERE rowid = ?",
                      [(sid + i, r[0]) for i, r in enumerate(rows)])
    return dst


def _every_value_is_flagged(leaks) -> None:
    where = {(lk.table, lk.column, lk.kind) for lk in leaks}
    assert {("sqlite_master", "trigger", "schema"), ("sqlite_master", "trigger", "secret"),
            ("sqlite_master", "view", "schema"), ("sqlite_master", "view", "email"),
            ("sqlite_master", "table", "user"), ("sqlite_master", "column", "user"),
            ("sqlite_master", "index", "user"), ("sqlite_master", "table", "secret")} <= where
    excerpts = [lk.excerpt for lk in leaks if lk.kind == "secret"]
    assert any("PRIVATE KEY" in e for e in excerpts)
    for name, token in TOKENS.items():  # each shape is flagged, by its first characters
        head = token[:3] if name != "slack_webhook" else "ser"
        assert any(e.startswith(head) for e in excerpts), name


def test_check_flags_the_schema_pem_and_every_token_shape(hostile_export):
    _every_value_is_flagged(find_leaks(hostile_export))
    r = scrub("--check", hostile_export)
    assert r.returncode == 1 and "sqlite_master.trigger [schema]" in r.stdout
    for text in PLANTED:  # the listing names what leaks without repeating it
        assert text.lower() not in (r.stdout + r.stderr).lower(), text


def test_the_scrubbed_copy_holds_none_of_it_and_reads_the_same(hostile_export, tmp_path):
    out = tmp_path / "clean.sqlite"
    r = scrub(hostile_export, out)
    assert r.returncode == 0, r.stderr
    check = scrub("--check", out)
    assert check.returncode == 0 and "0 potential leaks" in check.stderr, check.stdout
    data = out.read_bytes().lower()
    for text in PLANTED:
        assert text.lower().encode() not in data, text
    with sqlite3.connect(out) as c:
        kinds = dict(c.execute("SELECT name, type FROM sqlite_master"))
        assert "view" not in kinds.values() and "trigger" not in kinds.values()
        assert "user_notes" in kinds and kinds["extra"] == "table"
    before, after = (analyze(load(p)).summary for p in (hostile_export, out))
    assert after.stalls == before.stalls and after.launches == before.launches == 300


@pytest.fixture(scope="module")
def hostile_kineto(tmp_path_factory):
    data = json.loads(gzip.decompress(KINETO_CASE1.read_bytes()))
    names = iter([f"key {PEM}", *(f"{k} {t}" for k, t in TOKENS.items())])
    for e in data["traceEvents"]:
        if e.get("cat") == "user_annotation" and e.get("name") == "schedule":
            name = next(names, None)
            if name is None:
                break
            e["name"] = name
    data["traceName"] = f"/home/{USER}/run/trace.json"
    dst = tmp_path_factory.mktemp("scrub") / "hostile.pt.trace.json.gz"
    dst.write_bytes(gzip.compress(json.dumps(data).encode(), compresslevel=1))
    return dst


def test_a_torch_profiler_trace_is_flagged_and_scrubbed_of_them(hostile_kineto, tmp_path):
    leaks = find_leaks(hostile_kineto)
    excerpts = [lk.excerpt for lk in leaks if lk.kind == "secret"]
    assert any("PRIVATE KEY" in e for e in excerpts)
    for name, token in TOKENS.items():
        head = token[:3] if name != "slack_webhook" else "ser"
        assert any(e.startswith(head) for e in excerpts), name
    out = tmp_path / "clean.pt.trace.json.gz"
    assert scrub(hostile_kineto, out).returncode == 0
    assert scrub("--check", out).returncode == 0
    data = gzip.decompress(out.read_bytes()).decode().lower()
    for text in PLANTED:
        assert text.lower() not in data, text
