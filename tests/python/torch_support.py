"""PyTorch for the tests that need it: imported, or the module is skipped (CI must have it:
.ci/run installs it, and there a missing torch fails instead of skipping)."""

import os

import pytest


def import_torch():
    try:
        import torch
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("PyTorch is not installed", allow_module_level=True)
    return torch


def node_names(node):
    return [c["frame"]["name"] for c in node["children"]]


def path_to(node, name, prefix=()):
    """Names from the root's child down to the first node named `name` (depth first)."""
    for child in node["children"]:
        here = prefix + (child["frame"]["name"],)
        if child["frame"]["name"] == name:
            return here
        found = path_to(child, name, here)
        if found:
            return found
    return None


def all_paths(node, prefix=()):
    out = []
    for child in node["children"]:
        here = prefix + (child["frame"]["name"],)
        out.append((here, child))
        out.extend(all_paths(child, here))
    return out
