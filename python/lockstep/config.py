"""Where and how the client reaches the coordinator, resolved exactly as the `lockstep` CLI
resolves it (client/cli/connection.cc).

Each setting comes from, in order: the argument given to Client() (the CLI's flag), the
environment, the config file. The config file is --config's (here `config=`), else
$LOCKSTEP_CONFIG, else $XDG_CONFIG_HOME/lockstep/config, else ~/.config/lockstep/config; a
missing default file is no error. It holds kubectl-style `key: value` lines (`#` comments):

    coordinator: coord.example.com:7000
    ca: /etc/lockstep/ca.crt
    token: 0f3c...
    cert: /home/me/.config/lockstep/me.crt   (optional, with key:)
    key: /home/me/.config/lockstep/me.key
    server_name: coord.example.com           (optional)
    insecure: false

`lockstep local --keep_running` writes one for its cluster, as an operator, to
<work_dir>/tls/client.config and prints its path.
"""

import dataclasses
import os
from typing import Dict, Mapping, Optional, Tuple

from lockstep.errors import ConfigError

DEFAULT_ADDRESS = "127.0.0.1:7000"


@dataclasses.dataclass(frozen=True)
class _Setting:
    """A setting: its Client() argument (the CLI flag's name), environment variable, config key."""
    arg: str
    env: str
    key: str


_ADDRESS = _Setting("coordinator", "LOCKSTEP_COORDINATOR", "coordinator")
_CA = _Setting("ca", "LOCKSTEP_CA", "ca")
_TOKEN = _Setting("token", "LOCKSTEP_TOKEN", "token")
_CERT = _Setting("cert", "LOCKSTEP_CERT", "cert")
_KEY = _Setting("key", "LOCKSTEP_KEY", "key")
_SERVER_NAME = _Setting("server_name", "LOCKSTEP_TLS_SERVER_NAME", "server_name")
_INSECURE = _Setting("insecure", "LOCKSTEP_INSECURE", "insecure")
_SETTINGS = (_ADDRESS, _CA, _TOKEN, _CERT, _KEY, _SERVER_NAME, _INSECURE)


@dataclasses.dataclass(frozen=True)
class Connection:
    """The resolved settings: the coordinator's host:port and the channel's security."""
    address: str
    insecure: bool = False
    ca: str = ""           # PEM file of the cluster CA
    token: str = ""        # bearer token (operator or viewer) from the coordinator's --tokens_file
    cert: str = ""         # optional client certificate (PEM), with key
    key: str = ""
    server_name: str = ""  # the name the coordinator's certificate must carry; "": the host dialed
    config_file: str = ""  # the config file read, "" when none


def _config_path(config: Optional[str], env: Mapping[str, str]) -> Tuple[str, bool]:
    """The config file and whether it was named (then it must be readable)."""
    if config:
        return config, True
    if env.get("LOCKSTEP_CONFIG"):
        return env["LOCKSTEP_CONFIG"], True
    if env.get("XDG_CONFIG_HOME"):
        return os.path.join(env["XDG_CONFIG_HOME"], "lockstep", "config"), False
    if env.get("HOME"):
        return os.path.join(env["HOME"], ".config", "lockstep", "config"), False
    return "", False


def read_config(path: str, named: bool) -> Dict[str, str]:
    """The `key: value` pairs of a config file.

    Raises ConfigError (NOT_FOUND) when a named file cannot be read, (INVALID_ARGUMENT) naming
    the line of an unknown key or an empty value.
    """
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        if not named:
            return {}
        raise ConfigError(f"config file {path}: cannot read it ({e.strerror})",
                          code_name="NOT_FOUND") from None
    keys = [s.key for s in _SETTINGS]
    config: Dict[str, str] = {}
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key not in keys or not value:
            raise ConfigError(
                f"config file {path} line {number}: expected `key: value` with key one of "
                f"{', '.join(keys)}; got \"{line}\"")
        config[key] = value
    return config


def resolve(args: Mapping[str, object], env: Optional[Mapping[str, str]] = None) -> Connection:
    """Resolves a Connection from Client()'s arguments, the environment and the config file.

    `args` maps the Client() argument names (coordinator, ca, token, cert, key, server_name,
    insecure, config) to values; None means "not given" (fall through to the environment).
    An explicit insecure=False is given, as an explicit empty string is for the others.
    `env` defaults to os.environ.

    Raises ConfigError: INVALID_ARGUMENT for a bad config line, no CA without insecure, or a
    certificate without its key; NOT_FOUND for an unreadable named config file or CA file.
    """
    env = os.environ if env is None else env
    path, named = _config_path(args.get("config"), env)  # type: ignore[arg-type]
    config = read_config(path, named)

    def lookup(s: _Setting) -> str:
        value = args.get(s.arg)
        if value is not None:
            if isinstance(value, bool):
                return "true" if value else "false"
            return str(value)
        if env.get(s.env):
            return env[s.env]
        return config.get(s.key, "")

    insecure = lookup(_INSECURE).lower() in ("true", "1", "yes")
    c = Connection(address=lookup(_ADDRESS) or DEFAULT_ADDRESS, insecure=insecure,
                   ca=lookup(_CA), token=lookup(_TOKEN), cert=lookup(_CERT), key=lookup(_KEY),
                   server_name=lookup(_SERVER_NAME), config_file=path if config else "")
    check(c)
    return c


def check(c: Connection) -> None:
    """What the CLI's CheckTlsOptions checks before dialing, with the same messages.

    The certificate is not verified against the CA here (the TLS handshake does it).
    """
    if c.insecure:
        return
    if not c.ca:
        raise ConfigError(
            "ca: the cluster CA's certificate is needed to speak TLS (Client(ca=...), "
            "$LOCKSTEP_CA or the config file's ca:; make one with `lockstep certs init`), or "
            "pass insecure=True for plaintext without authorization")
    if not os.access(c.ca, os.R_OK):
        raise ConfigError(f"ca: cannot read {c.ca}", code_name="NOT_FOUND")
    if bool(c.cert) != bool(c.key):
        raise ConfigError("cert and key go together: pass both")
    for name, path in (("cert", c.cert), ("key", c.key)):
        if path and not os.access(path, os.R_OK):
            raise ConfigError(f"{name}: cannot read {path}", code_name="NOT_FOUND")

