# plot_scaling.py: draws bench_scaling's JSON (scaling.json) as one PNG with four panels:
# call cost against argument count, lookup against table size, calls/s by threads, allocation.
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PANELS = [
    ("args", "packed call against argument count", "arguments (int)", "ns per call", False),
    ("lookup", "global lookup against table size", "registered names", "ns per lookup", True),
    ("threads", "calls per second, one shared function", "threads", "calls / s", False),
    ("alloc", "tensor empty + release against size", "bytes", "ns per tensor", True),
]
STYLE = {"packfn": ("tab:blue", "o"), "tvmffi": ("tab:orange", "s")}


def main(src, dst):
    with open(src) as f:
        data = json.load(f)
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for ax, (series, title, xlabel, ylabel, logx) in zip(axes.flat, PANELS):
        for impl in ("packfn", "tvmffi"):
            pts = sorted((p for p in data["points"] if p["series"] == series and p["impl"] == impl),
                         key=lambda p: p["x"])
            if not pts:
                continue
            xs = [p["x"] for p in pts]
            med = [p["median"] for p in pts]
            lo = [p["median"] - p["min"] for p in pts]
            hi = [p["max"] - p["median"] for p in pts]
            color, marker = STYLE[impl]
            label = "TVM-FFI" if impl == "tvmffi" else "packfn"
            if series == "threads":
                off = -0.1 if impl == "packfn" else 0.1
                ax.bar([x + off for x in xs], med, width=0.2, yerr=[lo, hi], color=color,
                       label=label, capsize=3)
                ax.set_xticks([1, 2])
            else:
                ax.errorbar(xs, med, yerr=[lo, hi], color=color, marker=marker, label=label,
                            capsize=3)
        if logx:
            ax.set_xscale("log")
        if series in ("alloc",):
            ax.set_yscale("log")
        if series == "args":
            ax.set_xscale("log", base=2)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend()
    meta = data.get("meta", {})
    fig.suptitle("packfn scaling (median, bars min-max; %s iterations x %s repetitions)"
                 % (meta.get("iters", "?"), meta.get("reps", "?")))
    fig.tight_layout()
    fig.savefig(dst, dpi=90)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: plot_scaling.py SCALING_JSON OUT_PNG")
    main(sys.argv[1], sys.argv[2])
