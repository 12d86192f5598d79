"""The verdict cache: buckets, the nearest-shape rule, atomic writes, verdicts' ages and the checks on what goes in."""

import errno
import os
import stat
import time

import pytest

from jobaware import card as cards
from jobaware.adapters.slurm.verdicts import (
    ACL_GROUP_OBJ,
    ACL_MASK,
    ACL_OTHER,
    ACL_USER,
    ACL_USER_OBJ,
    NO_ID,
    Shape,
    Verdict,
    acl_entries,
    bucket,
    lookup,
    read_cache,
    users_folder,
    write_cache,
)
from jobaware.errors import InputError


def said(p_fail=0.7, kind="TIMEOUT", resource="io", n_similar=10, n_failed=8, n_timeout=7, model_version="3",
         threshold=0.5) -> dict:
    """What the registered card parts say of jobs like these (failure's and resource's own words), as the adapter
    caches it: the parts' words and advice, with the counts of how the similar jobs ended."""
    card = {"parts": {
        "failure": {"status": "ok", "reason": None, "p_fail": p_fail, "likely": kind or "FAILED",
                    "threshold": threshold, "likely_fail": p_fail >= threshold, "model_version": model_version},
        "resource": {"status": "ok", "reason": None, "binding": resource, "model_version": "2"}}}
    ends = ["TIMEOUT"] * n_timeout + ["FAILED"] * (n_failed - n_timeout) + ["COMPLETED"] * (n_similar - n_failed)
    history = {"similar": [{"final": {"state": end}} for end in ends], "site": {}}
    return {"comment": "; ".join(cards.words(card, history)), "advice": cards.advice(card, history),
            "n_similar": n_similar}


def verdict(user="ana", account="phys", partition="debug", time=60, nodes=1, cpus=4, mem=4000, gpus=0, created=None,
            **kw):
    return Verdict(user=user, account=account, partition=partition, created=created or int(_now()),
                   shape=Shape(time_minutes=time, nodes=nodes, cpus=cpus, mem_mib=mem, gpus=gpus), **said(**kw))


def _now() -> float:
    return time.time()


def test_the_cached_words_are_the_card_parts_words():
    v = verdict()
    assert v.comment == "failure risk 70%, TIMEOUT likely; 8/10 similar failed; model 3; io-bound"
    assert v.advice == ("failure risk 70%, TIMEOUT likely: jobs like this one ran out of time in 7 of their last 10 "
                        "runs; ask for more --time[ than the {time_minutes} minutes asked] (model 3).")
    assert verdict(p_fail=0.05, kind="", resource="cpu", n_failed=0, n_timeout=0).advice == ""


def test_buckets_double():
    assert [bucket(x) for x in (0, 1, 2, 3, 6, 7, 14, 15, 60, 1440)] == [0, 1, 1, 2, 2, 3, 3, 4, 5, 10]


def test_exact_then_nearest_then_user_partition_then_nothing():
    short, long_ = verdict(time=30, p_fail=0.1, kind=""), verdict(time=600)
    other = verdict(account="chem", time=30, cpus=64, p_fail=0.4)
    cached = [short, long_, other]
    assert lookup(cached, "ana", "phys", "debug", Shape(time_minutes=30, nodes=1, cpus=4, mem_mib=4000, gpus=0)) \
        == (short, "exact")
    # 300 minutes: bucket 8, one from 600's 9, three from 30's 4
    assert lookup(cached, "ana", "phys", "debug", Shape(time_minutes=300, nodes=1, cpus=4, gpus=0)) \
        == (long_, "nearest")
    # the account is not cached: any account of this user in this partition
    assert lookup(cached, "ana", "", "debug", Shape(time_minutes=30, cpus=50)) == (other, "user+partition")
    assert lookup(cached, "bob", "phys", "debug", Shape(time_minutes=30)) is None
    assert lookup(cached, "ana", "phys", "gpu", Shape(time_minutes=30)) is None


def test_ties_go_to_more_similar_jobs_then_file_order():
    few, many = verdict(time=15, n_similar=3, n_failed=1, n_timeout=0), verdict(time=63, n_similar=30)
    assert lookup([few, many], "ana", "phys", "debug", Shape(time_minutes=31))[0] is many
    one, seven = verdict(time=63, cpus=1, n_similar=30), verdict(time=63, cpus=7, n_similar=30)
    assert lookup([one, seven], "ana", "phys", "debug", Shape(time_minutes=31, cpus=3))[0] is one
    assert lookup([seven, one], "ana", "phys", "debug", Shape(time_minutes=31, cpus=3))[0] is seven


def test_write_is_atomic_readable_and_counts_generations(tmp_path):
    path = tmp_path / "spool" / "verdicts.tsv"
    assert write_cache(path, [verdict(), verdict(time=600).model_dump()], stale_after=900,
                       default_partition="debug") == 1
    assert write_cache(path, [verdict()]) == 2
    # no temporary file left behind; the per-user folders of this generation and the one before, and the link
    assert sorted(os.listdir(path.parent)) == [".verdicts.tsv.users.1", ".verdicts.tsv.users.2", "verdicts.tsv",
                                               "verdicts.tsv.users"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # the writer's (SlurmUser's) alone
    cache = read_cache(path)
    assert (cache.generation, cache.stale_after, cache.max_age, len(cache.verdicts)) == (2, 3600, 30 * 86_400, 1)
    back, sent = cache.verdicts[0], verdict()
    assert back.key() == sent.key() and (back.comment, back.advice, back.n_similar) == (sent.comment, sent.advice, 10)
    path.write_text("garbage\n")
    assert write_cache(path, []) == 1


def test_each_user_has_a_file_of_their_own_verdicts(tmp_path):
    """`PATH.users/USER.tsv`: the same format, that user's lines only; a user without verdicts has no file; the
    folder two generations back is gone."""
    path = tmp_path / "verdicts.tsv"
    write_cache(path, [verdict(), verdict(user="bob"), verdict(time=600)], default_partition="debug")
    write_cache(path, [verdict(), verdict(user="bob")], default_partition="debug")
    write_cache(path, [verdict(), verdict(time=600)], default_partition="debug")
    users = users_folder(path)
    assert os.readlink(users) == ".verdicts.tsv.users.3" and sorted(os.listdir(users)) == ["#header.tsv", "ana.tsv"]
    assert sorted(p.name for p in tmp_path.glob(".verdicts.tsv.users.*")) == [".verdicts.tsv.users.2",
                                                                               ".verdicts.tsv.users.3"]
    whole, mine = path.read_text().split("\n"), (users / "ana.tsv").read_text().split("\n")
    assert whole == mine  # every verdict is ana's: the same text, header included
    assert stat.S_IMODE((users / "ana.tsv").stat().st_mode) == 0o600  # ana is no user of this host: no ACL
    assert stat.S_IMODE(os.stat(users).st_mode) == 0o755
    write_cache(path, [verdict(), verdict(user="bob")])
    bob = (users / "bob.tsv").read_text().split("\n")
    assert bob[0].split("\t")[6] == "1" and bob[1].startswith("bob\t") and bob[2:] == ["end\t1", ""]
    assert bob[0].split("\t")[:6] == path.read_text().split("\t")[:6]  # the same generation and times
    header = (users / "#header.tsv").read_text().split("\n")  # the CLI filters' view of the cache: no verdicts
    assert header[0].split("\t")[:6] == bob[0].split("\t")[:6] and header[0].split("\t")[6] == "0"
    assert header[1:] == ["end\t0", ""] and stat.S_IMODE((users / "#header.tsv").stat().st_mode) == 0o644


def test_each_verdict_keeps_its_own_age_and_old_ones_are_left_out(tmp_path):
    path, now = tmp_path / "verdicts.tsv", int(_now())
    write_cache(path, [verdict(time=60, created=now - 7200), verdict(time=600, created=now - 60)], max_age=3600)
    cache = read_cache(path)
    assert [v.created for v in cache.verdicts] == [now - 7200, now - 60]
    assert [v.shape.time_minutes for v in cache.current(now)] == [511]  # 600 minutes come back as bucket 9 (511-1022)
    assert lookup(cache.current(now), "ana", "phys", "debug", Shape(time_minutes=60))[1] == "nearest"


@pytest.mark.parametrize("bad, message", [
    ({"comment": "two\tfields"}, "comment: a tab"),
    ({"user": "ana\tx"}, "user"),
    ({"advice": "two\nlines"}, "advice: a tab, line break"),
    ({"comment": ""}, "comment"),
    ({"n_similar": -1}, "n_similar"),
])
def test_bad_verdicts_are_one_line_errors_naming_the_field(bad, message, tmp_path):
    item = verdict().model_dump() | bad
    with pytest.raises(InputError, match=rf"verdict 1: .*{message}"):
        write_cache(tmp_path / "v.tsv", [verdict(time=600), item])
    assert not (tmp_path / "v.tsv").exists()


def test_incomplete_shapes_and_duplicates_are_refused(tmp_path):
    item = verdict().model_dump()
    item["shape"]["gpus"] = None
    with pytest.raises(InputError, match="verdict 0: shape: .*missing gpus"):
        write_cache(tmp_path / "v.tsv", [item])
    with pytest.raises(InputError, match="verdict 1: same user, account, partition and shape buckets as verdict 0"):
        write_cache(tmp_path / "v.tsv", [verdict(time=60), verdict(time=62)])


def test_read_names_the_bad_line(tmp_path):
    path = tmp_path / "v.tsv"
    write_cache(path, [verdict(), verdict(time=600)])
    lines = path.read_text().split("\n")
    path.write_text("\n".join(lines[:2] + ["ana\tphys\tdebug\t1\t2"] + lines[3:]))
    with pytest.raises(InputError, match=r"v.tsv:3: 5 fields, expected 12"):
        read_cache(path)
    path.write_text("\n".join(lines[:2]) + "\n")
    with pytest.raises(InputError, match="truncated"):
        read_cache(path)


def test_a_users_file_is_theirs_to_read_by_an_acl_entry(tmp_path, monkeypatch, caplog):
    """A user of this host ("nobody") gets their file 0600 with an ACL entry letting them read it; on a file system
    that refuses ACLs the file is made 0644 and a warning says so (the doctor names it)."""
    path = tmp_path / "verdicts.tsv"
    write_cache(path, [verdict(user="nobody"), verdict()])
    nobody = users_folder(path) / "nobody.tsv"
    assert acl_entries(nobody) == [(ACL_USER_OBJ, 6, NO_ID), (ACL_USER, 4, 65534), (ACL_GROUP_OBJ, 0, NO_ID),
                                   (ACL_MASK, 4, NO_ID), (ACL_OTHER, 0, NO_ID)]
    assert stat.S_IMODE(nobody.stat().st_mode) == 0o640  # the group bits show the ACL's mask
    assert acl_entries(users_folder(path) / "ana.tsv") is None  # no user of this host: SlurmUser's alone

    def refuse(*args):
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr(os, "setxattr", refuse)
    write_cache(path, [verdict(user="nobody"), verdict()])
    assert stat.S_IMODE(nobody.stat().st_mode) == 0o644 and acl_entries(nobody) is None
    assert "refuses POSIX ACLs, so the verdict files of 1 users are readable by every user" in caplog.text
