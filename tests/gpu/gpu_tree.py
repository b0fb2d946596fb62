"""Readers of hatchet trees shared by the GPU tests (exact counts, assertion dumps)."""


def kernels_under(node):
    """(kernel name, count) of every leaf with a count, anywhere below node."""
    out = []
    for child in node["children"]:
        if child["metrics"].get("count") and not child["children"]:
            out.append((child["frame"]["name"], child["metrics"]["count"]))
        out.extend(kernels_under(child))
    return out


def dump(node, depth=0):
    """The tree as indented 'name metrics' lines, for assertion messages."""
    line = "  " * depth + f"{node['frame']['name']} {node['metrics']}\n"
    return line + "".join(dump(c, depth + 1) for c in node["children"])


def total_count(node):
    return sum(c for _, c in kernels_under(node)) + (
        node["metrics"].get("count", 0) if node["frame"]["name"] != "ROOT" else 0
    )


def only_kernel(node):
    """The single kernel child of node, as (name, metrics)."""
    leaves = [c for c in node["children"] if "count" in c["metrics"]]
    assert len(leaves) == 1, [c["frame"]["name"] for c in node["children"]]
    return leaves[0]["frame"]["name"], leaves[0]["metrics"]


def is_warp(event):
    """A warp slice of an intra-kernel trace (pid "<kernel> Core<sm> CTA<cta>", tid "warp <w>")."""
    return event.get("ph") == "X" and str(event.get("tid", "")).startswith("warp ")


def gpu_process(device):
    """The pid of a GPU's kernel slices in a trace."""
    return f"GPU {device}"
