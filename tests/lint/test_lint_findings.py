"""Findings, redaction and the versioned report."""

from connectors.policy import Finding, build_report
from connectors.policy.findings import FindingDict, ReportDict, SummaryDict
from connectors.redact import REDACTED, is_secret_key, scrub, secret_values


def test_secret_values_are_redacted_on_construction():
    finding = Finding(
        "EOS001",
        "error",
        "m",
        ("sasl.password", "acks"),
        {"sasl.password": "x", "acks": "all"},
        "f",
    )
    assert finding.values == {"sasl.password": REDACTED, "acks": "all"}


def test_findings_are_hashable_values():
    finding = Finding("EOS001", "error", "m", ("k",), {"k": "1"}, "f")
    assert finding == Finding("EOS001", "error", "m", ("k",), {"k": "1"}, "f")
    assert len({finding, finding}) == 1


def test_report_counts_and_order():
    findings = [
        Finding("EOS013", "warning", "w", ("k",), {}, "f"),
        Finding("EOS002", "error", "e", ("k",), {"k": "1"}, "f"),
    ]
    report = build_report(findings, ["EOS002", "EOS013"], "java")
    assert report["version"] == 1
    assert [f["rule"] for f in report["findings"]] == ["EOS002", "EOS013"]
    assert report["summary"] == {
        "errors": 1,
        "warnings": 1,
        "infos": 0,
        "rules_checked": ["EOS002", "EOS013"],
        "client": "java",
    }
    assert report["findings"][0] == {
        "rule": "EOS002",
        "severity": "error",
        "message": "e",
        "keys": ["k"],
        "values": {"k": "1"},
        "fix": "f",
    }


def test_typed_dicts_match_the_json_schema(report_schema):
    assert set(ReportDict.__annotations__) == set(report_schema["properties"])
    assert set(FindingDict.__annotations__) == set(report_schema["$defs"]["finding"]["properties"])
    assert set(SummaryDict.__annotations__) == set(report_schema["$defs"]["summary"]["properties"])
    assert report_schema["$defs"]["finding"]["required"] == list(FindingDict.__annotations__)


def test_secret_keys():
    for key in (
        "sasl.password",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.key.pem",
        "sasl.jaas.config",
        "sasl.oauthbearer.client.secret",
        "basic.auth.user.info.token",
    ):
        assert is_secret_key(key), key
    for key in ("key.serializer", "transactional.id", "ssl.keystore.location", "sasl.username"):
        assert not is_secret_key(key), key


def test_scrub_replaces_every_secret_value():
    secrets = secret_values(
        [{"sasl.password": "hunter2", "sasl.username": "bob", "ssl.key.pem": ""}]
    )
    assert secrets == {"hunter2"}
    assert (
        scrub("auth failed for bob with hunter2", secrets) == f"auth failed for bob with {REDACTED}"
    )
