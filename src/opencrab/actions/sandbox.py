"""Who runs an execute_command command, and bubblewrap's command line for it.

When the server runs as root, a command never does: it runs as `[tools] command_uid` /
`command_gid` (65534, nobody) with no supplementary groups, no capabilities (an empty
bounding set too) and no_new_privs. Boxed, bubblewrap is started by root *without* a
user namespace (an unprivileged bwrap could not reach a workspace below the 0700 data
directory, and `--unshare-user --uid` would only rename host root inside the box: its
files, /etc/shadow's owner included, would still be its own). bubblewrap sets up the
mounts, drops every capability but the three setpriv needs, and setpriv (util-linux)
then switches to the unprivileged uid and drops the rest before `/bin/sh` starts.
A server that is not root runs bubblewrap unprivileged (`--unshare-all`, its own user
namespace) and the command keeps the server's uid, also with no capabilities.

Inside the box: /usr and the top-level links or folders (/bin, /lib…) read-only, from
/etc only ETC_ALLOWED (never shadow, gshadow, sudoers, ssh or TLS private keys, pip or
npm credentials) plus a passwd and a group naming root and the command's user, a fresh
/proc and /dev, a private /tmp of `[tools] command_tmp_size_mb`, and the workspace,
writable, as /workspace. No network, its own pid, IPC and UTS namespaces.
"""

from __future__ import annotations

import grp
import os
import pwd
from dataclasses import dataclass
from pathlib import Path

from opencrab.config.models import ToolsSection
from opencrab.errors import ValidationError

SANDBOX_ROOT = "/workspace"
MB = 1024 * 1024
# what of /etc a command sees (each bound read-only when it exists): the loader, name
# service and locale files, certificates, alternatives' links, git's system config
ETC_ALLOWED = (
    "alternatives",
    "ca-certificates",
    "ssl/certs",
    "ssl/openssl.cnf",
    "pki/tls/certs",
    "pki/ca-trust",
    "crypto-policies",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "nsswitch.conf",
    "hosts",
    "host.conf",
    "gai.conf",
    "protocols",
    "services",
    "mime.types",
    "magic",
    "magic.mime",
    "gitconfig",
    "inputrc",
    "locale.alias",
    "locale.conf",
    "os-release",
    "debian_version",
    "fonts",
    "terminfo",
    "python3",
)
# setpriv must be where the box sees it: under /usr or a top-level link into it
SETPRIV_PLACES = ("/usr/bin/setpriv", "/bin/setpriv", "/usr/sbin/setpriv", "/sbin/setpriv")


@dataclass(frozen=True)
class CommandUser:
    """The uid and gid a command runs as; `switched` when they are not the server's own."""

    uid: int
    gid: int
    switched: bool

    def passwd(self) -> str:
        """The /etc/passwd the box gets: root and this user, whose home is /workspace."""
        lines = ["root:x:0:0:root:/root:/usr/sbin/nologin"]
        if self.uid != 0:
            lines.append(f"{_user_name(self.uid)}:x:{self.uid}:{self.gid}::{SANDBOX_ROOT}:/bin/sh")
        return "\n".join(lines) + "\n"

    def group(self) -> str:
        """The /etc/group the box gets: root's group and this user's."""
        lines = ["root:x:0:"]
        if self.gid != 0:
            lines.append(f"{_group_name(self.gid)}:x:{self.gid}:")
        return "\n".join(lines) + "\n"


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return "opencrab"


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return "opencrab"


def command_user(limits: ToolsSection) -> CommandUser:
    """Who runs a command: `[tools] command_uid/gid` when the server is root, else itself."""
    if os.geteuid() == 0:
        return CommandUser(limits.command_uid, limits.command_gid, switched=True)
    return CommandUser(os.getuid(), os.getgid(), switched=False)


def setpriv_path() -> str:
    """setpriv's path, or a ValidationError saying that a root server needs it."""
    for place in SETPRIV_PLACES:
        if os.access(place, os.X_OK):
            return place
    raise ValidationError(
        "execute_command runs commands as an unprivileged user when the server runs as "
        "root, which needs setpriv (package util-linux); it is not installed, so the "
        "command was not run; install util-linux or run the server as another user"
    )


def drop_to(user: CommandUser, setpriv: str) -> list[str]:
    """setpriv's command line that becomes `user` with no capabilities, then runs on."""
    return [
        setpriv,
        f"--reuid={user.uid}",
        f"--regid={user.gid}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    ]


def bwrap_argv(
    bwrap: str, limits: ToolsSection, user: CommandUser, workspace: Path, etc: Path, command: str
) -> list[str]:
    """bubblewrap's command line for `command` (see the module docstring).

    `etc` is a folder holding the `passwd` and `group` files the box gets.
    """
    argv = box_base(bwrap, user, etc, network=False)
    argv += ["--size", str(limits.command_tmp_size_mb * MB), "--perms", "1777"]
    argv += ["--tmpfs", "/tmp"]  # noqa: S108
    argv += ["--bind", str(workspace), SANDBOX_ROOT, "--chdir", SANDBOX_ROOT]
    if user.switched:
        argv += drop_to(user, setpriv_path())
    return [*argv, "/bin/sh", "-c", command]


def box_base(bwrap: str, user: CommandUser, etc: Path, *, network: bool) -> list[str]:
    """The part of a box every boxed program shares (an execute_command command, a stdio
    MCP server): its namespaces (the network's only when `network` is False), no
    capabilities, /usr and the top-level links read-only, ETC_ALLOWED, the passwd and
    group in `etc`, a fresh /proc and /dev. The caller adds /tmp, what is writable, and
    `drop_to` when `user.switched`."""
    if user.switched:  # root: no user namespace, setpriv drops to the user at the end
        argv = [bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-uts"]
        if not network:
            argv.append("--unshare-net")
        argv += ["--unshare-cgroup-try", "--cap-drop", "ALL"]
        for needed in ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP"):  # setpriv's, dropped by it
            argv += ["--cap-add", needed]
    else:
        argv = [bwrap, "--unshare-all", *(["--share-net"] if network else []), "--cap-drop", "ALL"]
    argv += ["--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr"]
    for top in ("bin", "sbin", "lib", "lib32", "lib64"):
        path = Path("/") / top
        if path.is_symlink():  # merged /usr: /bin -> usr/bin
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    argv += _etc_binds()
    for name in ("passwd", "group"):
        argv += ["--ro-bind", str(etc / name), f"/etc/{name}"]
    argv += ["--symlink", "../proc/self/mounts", "/etc/mtab"]
    return [*argv, "--proc", "/proc", "--dev", "/dev"]


def _etc_binds() -> list[str]:
    """Read-only binds of what exists of ETC_ALLOWED, below folders readable by all
    (bubblewrap, run by root, makes the folders it needs for a bind 0700)."""
    argv = ["--perms", "0755", "--dir", "/etc"]
    made = {"/etc"}
    for name in ETC_ALLOWED:
        source = Path("/etc", name)
        if not source.exists():
            continue
        for parent in reversed(source.parents):
            if str(parent).startswith("/etc/") and str(parent) not in made:
                argv += ["--perms", "0755", "--dir", str(parent)]
                made.add(str(parent))
        argv += ["--ro-bind-try", str(source), str(source)]
    return argv


def write_etc(user: CommandUser, folder: Path) -> None:
    """Write the box's passwd and group (readable by all, as the system's are) to `folder`."""
    for name, text in (("passwd", user.passwd()), ("group", user.group())):
        path = folder / name
        path.write_text(text)
        path.chmod(0o644)
