"""Named API keys: created hashed into a 0600 file written atomically, verified by hash,
revoked, and picked up again when the file changes; the shared tokens as principals of the
default tenant; no credential at all as the anonymous principal."""

from __future__ import annotations

import hashlib
import json
import stat
import time
from pathlib import Path

import pytest

from toolhub.errors import ErrorCode
from toolhub.tenancy.keys import (
    KEY_PREFIX,
    KeyFile,
    KeyFileError,
    Principals,
    Unauthorized,
    UnknownKey,
    default_keys_file,
)
from toolhub.tenancy.principal import ANONYMOUS, Principal

#: A revoke or a new key shows within RECHECK_S (1 s); this is how long a busy machine gets.
CHANGE_DEADLINE_S = 15.0


@pytest.fixture
def keys(tmp_path: Path) -> KeyFile:
    return KeyFile(tmp_path / "home" / "keys.json")


def bearer(key: str) -> str:
    return f"Bearer {key}"


def eventually_refused(principals: Principals, key: str) -> Unauthorized:
    deadline = time.monotonic() + CHANGE_DEADLINE_S
    while True:
        try:
            principals.resolve(bearer(key))
        except Unauthorized as refused:
            return refused
        assert time.monotonic() < deadline, "the key was still accepted"
        time.sleep(0.1)


def test_a_created_key_is_stored_hashed_in_a_private_file(keys: KeyFile) -> None:
    entry, key = keys.create("acme", "ci bot")
    prefix = f"{KEY_PREFIX}{entry.key_id}_"
    secret = key.removeprefix(prefix)
    assert key.startswith(prefix) and len(secret) == 43  # 32 random bytes, urlsafe base64
    assert (entry.tenant, entry.name, entry.revoked) == ("acme", "ci bot", False)

    text = keys.path.read_text()
    assert key not in text and secret not in text
    stored = json.loads(text)["keys"][0]
    assert stored["sha256"] == hashlib.sha256(key.encode()).hexdigest()
    assert stored["key_id"] == entry.key_id and stored["tenant"] == "acme"
    assert stat.S_IMODE(keys.path.stat().st_mode) == 0o600
    # Written through a temporary file replaced in one step: none is left behind.
    assert sorted(p.name for p in keys.path.parent.iterdir()) == ["keys.json", "keys.json.lock"]


def test_several_keys_per_tenant_each_its_own_principal(keys: KeyFile) -> None:
    first, one = keys.create("acme", "agent-1")
    second, two = keys.create("acme", "agent-2")
    other, three = keys.create("globex")
    assert len({first.key_id, second.key_id, other.key_id}) == 3
    principals = Principals(None, keys)
    assert principals.resolve(bearer(one)) == Principal("acme", first.key_id)
    assert principals.resolve(bearer(two)) == Principal("acme", second.key_id)
    assert principals.resolve(bearer(three)) == Principal("globex", other.key_id)
    assert principals.multi_tenant


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        (None, "missing bearer token"),
        ("Basic abc", "missing bearer token"),
        ("Bearer ", "missing bearer token"),
        ("Bearer thk_000000000000_nope", "unknown API key"),
        ("Bearer thk_", "unknown API key"),
        ("Bearer not-a-key", "wrong bearer token"),
    ],
)
def test_what_names_no_principal_is_refused_with_its_reason(
    keys: KeyFile, header: str | None, reason: str
) -> None:
    keys.create("acme")
    with pytest.raises(Unauthorized) as refused:
        Principals(None, keys).resolve(header)
    assert refused.value.reason == reason


def test_a_key_with_a_wrong_secret_is_unknown(keys: KeyFile) -> None:
    entry, key = keys.create("acme")
    forged = f"{KEY_PREFIX}{entry.key_id}_{'A' * 43}"
    with pytest.raises(Unauthorized, match="unknown API key"):
        Principals(None, keys).resolve(bearer(forged))
    assert Principals(None, keys).resolve(bearer(key)).tenant == "acme"


def test_a_revoke_holds_without_a_restart(keys: KeyFile) -> None:
    revoked, doomed = keys.create("acme", "leaked")
    kept, fine = keys.create("acme", "kept")
    principals = Principals(None, keys)
    assert principals.resolve(bearer(doomed)).key_id == revoked.key_id

    assert keys.revoke(revoked.key_id).revoked
    refused = eventually_refused(principals, doomed)
    assert refused.reason == "revoked API key" and refused.key_id == revoked.key_id
    assert principals.resolve(bearer(fine)) == Principal("acme", kept.key_id)
    assert principals.multi_tenant, "a revoked key keeps the fleet's layout"
    assert keys.read()[revoked.key_id].revoked


def test_a_new_key_is_picked_up_without_a_restart(keys: KeyFile) -> None:
    principals = Principals("tok", keys)
    assert not principals.multi_tenant
    entry, key = keys.create("acme")
    deadline = time.monotonic() + CHANGE_DEADLINE_S
    while True:
        try:
            assert principals.resolve(bearer(key)) == entry.principal
            break
        except Unauthorized:
            assert time.monotonic() < deadline, "the new key was never accepted"
            time.sleep(0.1)
    assert principals.multi_tenant


def test_shared_tokens_are_principals_of_the_default_tenant(keys: KeyFile) -> None:
    principals = Principals("tok-a, tok-b", keys)
    assert principals.resolve(bearer("tok-a")) == Principal("default", "token-1")
    assert principals.resolve(bearer("tok-b")) == Principal("default", "token-2")
    with pytest.raises(Unauthorized, match="wrong bearer token"):
        principals.resolve(bearer("tok-a, tok-b"))
    assert not principals.open and not principals.multi_tenant


def test_no_token_and_no_key_is_anonymous(keys: KeyFile) -> None:
    principals = Principals(None, keys)
    assert principals.open
    assert principals.resolve(None) is ANONYMOUS
    assert principals.resolve(bearer("anything")) is ANONYMOUS


def test_a_malformed_key_file_stops_the_start_and_later_refuses_every_key(
    keys: KeyFile,
) -> None:
    keys.path.parent.mkdir(parents=True)
    keys.path.write_text("{not json")
    with pytest.raises(KeyFileError) as failed:
        Principals("tok", keys)
    assert failed.value.code == ErrorCode.KEY_FILE_ERROR
    assert "malformed" in str(failed.value) and "\n" not in str(failed.value)

    keys.path.unlink()
    _, key = keys.create("acme")
    principals = Principals("tok", keys)
    assert principals.resolve(bearer(key)).tenant == "acme"
    keys.path.write_text('{"keys": [{"key_id": "zz"}]}')  # broken by hand
    refused = eventually_refused(principals, key)
    assert refused.reason == "unknown API key"
    assert principals.resolve(bearer("tok")).tenant == "default", "tokens still work"
    assert principals.multi_tenant, "fail closed: still multi-tenant"


def test_revoking_an_unknown_key_is_a_typed_error(keys: KeyFile) -> None:
    keys.create("acme")
    with pytest.raises(UnknownKey) as refused:
        keys.revoke("0123456789ab")
    assert refused.value.code == ErrorCode.UNKNOWN_KEY
    assert "0123456789ab" in str(refused.value)


@pytest.mark.parametrize(
    ("tenant", "name"), [("Acme", ""), ("a~b", ""), ("", ""), ("acme", "x" * 65), ("acme", "[b]")]
)
def test_malformed_tenants_and_names_are_refused(keys: KeyFile, tenant: str, name: str) -> None:
    with pytest.raises(ValueError):
        keys.create(tenant, name)
    assert not keys.path.exists()


def test_the_file_is_named_by_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TOOLHUB_KEYS_FILE", raising=False)
    monkeypatch.setenv("TOOLHUB_HOME", str(tmp_path / "home"))
    assert default_keys_file() == tmp_path / "home" / "keys.json"
    monkeypatch.setenv("TOOLHUB_KEYS_FILE", str(tmp_path / "elsewhere.json"))
    assert default_keys_file() == tmp_path / "elsewhere.json"
