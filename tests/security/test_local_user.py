"""The attacker fixture itself: a user who is not root, whose files are its own."""


def test_the_local_user_is_unprivileged(local_user):
    assert local_user.run("id", "-u").stdout.strip() == str(local_user.uid) != "0"
    local_user.run("sh", "-c", "echo mine > planted")
    assert (local_user.home / "planted").stat().st_uid == local_user.uid
    assert local_user.run("cat", "/etc/shadow", check=False).returncode != 0
