"""dlperf.secrets over hostile passwords: whatever a password holds ('#', '?', '@', '%', '/', ':', spaces, a quote,
percent-encoding, a `password=` parameter, a percent-encoded parameter name), the masked text holds none of it, and
a message quoting it later, in any shape, is masked too. And what no history store can hold is named."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from dlperf.cli.main import main
from dlperf.reporting.history_db import MAX_NAME_BYTES, MAX_RECORD_BYTES, parse_target, unstorable
from dlperf.secrets import MASK, learn, mask, mask_url

HOSTILE = ["Ha#sh-pw-31", "Qu?ery-pw=32", "At@sign-pw", "Pe%rcent-pw", "Sl/ash-pw", "Co:lon-pw", "Sp ace pw", "it's-pw"]


def pieces(password: str) -> list[str]:
    """The password's runs of letters and digits of 3 or more: a half-masked password still shows one."""
    import re

    return [p for p in re.split(r"[^A-Za-z0-9]+", password) if len(p) >= 3 and p != "pw"]


def assert_hidden(text: str, password: str) -> None:
    for form in {password, quote(password, safe=""), *pieces(password)}:
        assert form not in text, (form, text)


@pytest.mark.parametrize("password", HOSTILE)
@pytest.mark.parametrize("encoded", [True, False])
def test_userinfo_password_is_masked_whole(password, encoded):
    given = quote(password, safe="") if encoded else password
    for url in (
        f"postgresql://dlperf:{given}@127.0.0.1:5432/perf",
        f"postgresql://dlperf:{given}@db.example/perf?sslmode=require",
        f"postgres://dlperf:{given}@/perf?host=/tmp/dlpg1",
        f"http://user:{given}@127.0.0.1:5000",
    ):
        shown = mask_url(url)
        assert_hidden(shown, password)
        assert shown.startswith(url.split("://")[0] + "://dlperf:***@") or shown.startswith("http://user:***@")
        assert "127.0.0.1" in shown or "db.example" in shown or "host=/tmp/dlpg1" in shown  # the rest is kept


@pytest.mark.parametrize("password", ["Pa#ram-pw-34", "Pa ram pw 34", "Pa&ram=pw"])
def test_password_parameters_are_masked(password):
    for url in (
        f"postgresql://dlperf@127.0.0.1/perf?password={quote(password, safe='')}",
        f"postgresql://dlperf@127.0.0.1/perf?sslmode=require&PASSWORD={quote(password, safe='')}&connect_timeout=3",
        f"postgresql://dlperf@127.0.0.1/perf?pass%77ord={quote(password, safe='')}",  # libpq decodes the name too
    ):
        shown = mask_url(url)
        assert_hidden(shown, password)
        assert "dlperf@127.0.0.1/perf?" in shown and f"={MASK}" in shown


def test_keyword_dsn_passwords_are_masked():
    assert mask("host=db password='a b' dbname=perf") == f"host=db password={MASK} dbname=perf"
    assert mask(r"host=db password='it\'s-pw' user=x") == f"host=db password={MASK} user=x"
    assert mask("host=db password=plainpw port=5432") == f"host=db password={MASK} port=5432"


def test_a_masked_password_is_masked_in_every_later_message():
    """libpq's "invalid percent-encoded token" quotes the password alone, as written; an error may quote it
    decoded: once its URL was masked (or given on the command line), every form is masked in any message."""
    mask_url("postgresql://dlperf:Iv4l%zzTk8n@127.0.0.1/perf")
    assert mask('invalid percent-encoded token: "Iv4l%zzTk8n"') == f'invalid percent-encoded token: "{MASK}"'
    learn(["history", "add", "--db=postgresql://dlperf:Dc0d%23Ed9x@h/perf"])
    assert mask("password for Dc0d#Ed9x refused, Dc0d%23Ed9x too") == f"password for {MASK} refused, {MASK} too"


def test_a_raw_at_sign_cut_by_libpq_is_masked_in_its_pieces():
    """libpq ends a raw password at its first `@` and takes what follows for the host: its error quotes that."""
    for url in ("postgresql://ci:Rw4a@Tt6b/Cc8d@127.0.0.1:5432/perf", "postgresql://ci:Rw4a@Tt6b:Cc8d@127.0.0.1/perf"):
        assert mask_url(url).startswith("postgresql://ci:***@127.0.0.1")
        assert mask("failed to resolve host 'Tt6b', port 'Cc8d'") == f"failed to resolve host '{MASK}', port '{MASK}'"


def test_environment_secrets_are_masked(monkeypatch):
    monkeypatch.setenv("PGPASSWORD", "Pg9p#Ss4w")
    monkeypatch.setenv("DLPERF_HISTORY", "postgresql://ci:Hi5t#Or7y@db/perf")
    assert mask("auth Pg9p#Ss4w then Hi5t#Or7y") == f"auth {MASK} then {MASK}"


def test_a_url_in_a_message_is_masked():
    text = "cannot connect to postgresql://ci:Ms6g#Pw2q@db:5432/perf: refused; and http://u:Tk3n?Zz8y@h:5000 too"
    shown = mask(text)
    assert "Ms6g" not in shown and "Pw2q" not in shown and "Tk3n" not in shown and "Zz8y" not in shown, shown
    assert "postgresql://ci:***@db:5432/perf: refused" in shown and "http://u:***@h:5000 too" in shown


def test_a_keyword_string_is_no_database_file(tmp_path, capsys, monkeypatch):
    """`--db "host=db password=..."` would be an SQLite file named by the password: refused, masked."""
    monkeypatch.chdir(tmp_path)
    code = main(["history", "show", "--db", "host=db user=ci password=Kw7d#Sn3p dbname=perf"])
    err = capsys.readouterr().err
    assert code == 2 and "libpq keyword string" in err and "Kw7d" not in err, err
    assert list(tmp_path.iterdir()) == []


def test_argparse_echo_is_masked(capsys):
    """An argument argparse does not expect is echoed in its error: a URL given without --db, say."""
    with pytest.raises(SystemExit):
        main(["history", "add", "res", "postgresql://ci:Ap8r#Se5x@db/perf"])
    err = capsys.readouterr().err
    assert "unrecognized arguments" in err and "Ap8r" not in err and "Se5x" not in err, err


def test_history_help_masks_the_default_url(monkeypatch, capsys):
    import importlib

    import dlperf.cli.history_cmd as history_cmd

    monkeypatch.setenv("DLPERF_HISTORY", "postgresql://ci:He1p#Df7t@db/perf")
    importlib.reload(history_cmd)
    try:
        with pytest.raises(SystemExit):
            main(["history", "--help"])
        out = capsys.readouterr().out
        assert "postgresql://ci:***@db/perf" in out.replace("\n", "").replace(" ", "") or "ci:***@" in out, out
        assert "He1p" not in out and "Df7t" not in out
    finally:
        monkeypatch.delenv("DLPERF_HISTORY")
        importlib.reload(history_cmd)


def test_shown_name_of_a_history_url():
    assert (
        parse_target("postgresql://ci:Ha#sh-pw-31@127.0.0.1:5433/perf").shown
        == "postgresql://ci:***@127.0.0.1:5433/perf"
    )


@pytest.mark.parametrize(
    "record, field",
    [
        ({"model": "resnet50", "notes": {"log": "step 3\x00garbage"}}, "field notes.log holds a NUL character"),
        ({"model": "resnet50", "tags": {"ga\x00te": 1}}, "key 'ga\\x00te' of tags holds a NUL character"),
        ({"model": "resnet50", "hosts": ["a", "node\ud800"]}, "field hosts[1] holds a lone surrogate (\\ud800)"),
        ({"model": "resnet50", "extra": {"loss": float("nan")}}, "field extra.loss is nan, which JSON cannot hold"),
    ],
)
def test_what_no_store_holds_is_named(record, field):
    problem = unstorable(("v1", "resnet50", "b128_fp32", "1n1g"), record, "{}")
    assert problem and problem.startswith(field), problem


def test_names_and_size_are_bounded():
    names = ("v1", "resnet50", "b128_fp32", "1n1g")
    assert unstorable(names, {"model": "resnet50"}, "{}") is None
    long_label = ("é" * (MAX_NAME_BYTES // 2 + 1), *names[1:])
    assert "its label is 514 bytes long" in unstorable(long_label, {}, "{}")
    assert unstorable(("v1", "res\x00net", *names[2:]), {}, "{}").startswith("its model holds a NUL")
    big = {"samples": "x" * 100, "model": "resnet50"}
    problem = unstorable(names, big, "x" * (MAX_RECORD_BYTES + 1))
    assert problem == "its JSON is 64 MiB (field samples the largest), over the 64 MiB a history holds"


def test_urls_found_in_any_text_each_character_looked_at_once():
    """A URL after digits or with no scheme letter is masked too, and so is one after a 900,000-letter word (the
    regex that tried a scheme from every letter took minutes on such a value; this scan reads each character once)."""
    from dlperf.secrets import mask

    text = "1postgresql://u:pw1@h/db, 9://x:pw2@z <http://a:pw3@c> " + "a" * 900_000 + " ftp://b:pw4@d"
    masked = mask(text)
    assert not any(f"pw{k}" in masked for k in range(1, 5)) and masked.count("***") == 4
    assert masked.startswith("1postgresql://u:***@h/db, 9://x:***@z <http://a:***@c> aaa")
