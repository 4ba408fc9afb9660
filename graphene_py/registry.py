"""A small registry of named datasets ($GRAPHENE_HOME/registry.json, default ~/.graphene), so that
`graphene run` without --graph uses the dataset made most recently and `graphene list` shows all."""
from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Optional

from . import startfiles
from .config import home_dir


def _path() -> str:
    return os.path.join(home_dir(), "registry.json")


def load() -> dict:
    startfiles.note(_path())
    try:
        with open(_path()) as f:
            reg = json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        reg = {}
    reg.setdefault("datasets", {})
    reg.setdefault("last", None)
    return reg


def _save(reg: dict) -> None:
    os.makedirs(home_dir(), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=home_dir(), prefix=".registry.")
    with os.fdopen(fd, "w") as f:
        json.dump(reg, f, indent=1)
    os.replace(tmp, _path())


def register(name: str, path: str) -> None:
    reg = load()
    reg["datasets"][name] = {"path": os.path.abspath(path), "registered": time.time()}
    reg["last"] = name
    _save(reg)


def unregister(name: str) -> bool:
    """Forget a name (the dataset itself is not touched). Returns whether it was registered."""
    reg = load()
    if name not in reg["datasets"]:
        return False
    del reg["datasets"][name]
    if reg.get("last") == name:
        reg["last"] = None
    _save(reg)
    return True


def names_at(path: str) -> list:
    """Registered names whose path is `path`."""
    p = os.path.abspath(path)
    return [n for n, e in load()["datasets"].items() if os.path.abspath(e["path"]) == p]


def lookup(name: str) -> Optional[str]:
    e = load()["datasets"].get(name)
    return e["path"] if e else None


def last() -> Optional[str]:
    reg = load()
    name = reg.get("last")
    if name and name in reg["datasets"]:
        return reg["datasets"][name]["path"]
    return None


def entries() -> dict:
    return load()["datasets"]
