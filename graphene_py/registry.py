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
from .errors import DatasetError


def _path() -> str:
    return os.path.join(home_dir(), "registry.json")


def load() -> dict:
    """The registry ({"datasets": {name: {"path": ...}}, "last": name or None}); empty when
    there is none yet. One that cannot be read, or is not a registry (hand-edited, damaged), is
    an error naming the file: never taken for empty, so the next partition cannot overwrite the
    names it holds."""
    path = _path()
    startfiles.note(path)
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        text = None
    except OSError as e:
        raise DatasetError(f"cannot read the dataset registry {path}: {e.strerror}") from None
    if text is None:
        return {"datasets": {}, "last": None}
    try:
        reg = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DatasetError(f"{path}: the dataset registry is not valid JSON ({e}); fix or remove "
                           f"it (`graphene partition` registers each dataset again)") from None
    why = _shape_problem(reg)
    if why:
        raise DatasetError(f"{path}: not a dataset registry ({why}); fix or remove it "
                           f"(`graphene partition` registers each dataset again)")
    reg.setdefault("datasets", {})
    reg.setdefault("last", None)
    return reg


def _shape_problem(reg) -> str:
    """What makes a parsed registry unusable, or ''."""
    if not isinstance(reg, dict):
        return f"a JSON {type(reg).__name__}, not an object"
    ds = reg.get("datasets", {})
    if not isinstance(ds, dict):
        return '"datasets" is not an object'
    for name, e in ds.items():
        if not isinstance(e, dict) or not isinstance(e.get("path"), str):
            return f'the entry of {name!r} has no "path"'
    if reg.get("last") is not None and not isinstance(reg["last"], str):
        return '"last" is not a name'
    return ""


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
