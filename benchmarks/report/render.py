"""The Markdown report and its PNG charts (matplotlib, Agg)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def _ms(x: float) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if abs(x) < 1:
        return f"{x:.3f} ms"
    return f"{x:,.0f} ms" if abs(x) >= 100 else f"{x:,.1f} ms"


def _ratio(x: float, base: float | None) -> str:
    if not base or x is None or math.isnan(x):
        return ""
    return f" ({x / base:,.1f}x)"


def charts(results: dict[str, Any], out: Path, prefix: str) -> dict[str, str]:
    made: dict[str, str] = {}
    burst = results.get("burst") or {}
    if burst:
        fig, ax = plt.subplots(figsize=(8, 4))
        for r in burst.values():
            lag = r["lag"]
            ax.plot([t for t, _, _ in lag], [max(d, b) for _, d, b in lag], label=r["label"])
        ax.set_xlabel("seconds since the burst began")
        ax.set_ylabel("oldest queued job (s), worst lane")
        ax.set_title("Celebrity burst: fan-out lane lag over time")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        name = f"{prefix}-burst-lag.png"
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        made["burst_lag"] = name
        fig, ax = plt.subplots(figsize=(8, 4))
        labels = [r["label"] for r in burst.values()]
        p50 = [r["visible_p50_ms"] for r in burst.values()]
        p99 = [r["visible_p99_ms"] for r in burst.values()]
        xs = range(len(labels))
        ax.bar([x - 0.2 for x in xs], p50, 0.4, label="p50")
        ax.bar([x + 0.2 for x in xs], p99, 0.4, label="p99")
        ax.set_xticks(list(xs), labels, rotation=15, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("ordinary post-to-visible (ms, log)")
        ax.axhline(500, color="grey", ls="--", lw=1)
        ax.set_title("Ordinary posts during the celebrity burst")
        ax.legend()
        fig.tight_layout()
        name = f"{prefix}-burst-visible.png"
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        made["burst_visible"] = name
    curves = {k: v for k, v in (results.get("curves") or {}).items() if k in ("push", "pull")}
    if curves:
        fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
        for key, c in curves.items():
            xs = [p["followers"] for p in c["fanout"]]
            a.plot(xs, [p["visible_ms"] for p in c["fanout"]], "o-", label=key)
            ks = [r["followees"] for r in c["reads"]]
            b.plot(ks, [r["p50_ms"] for r in c["reads"]], "o-", label=f"{key} p50")
            b.plot(ks, [r["p99_ms"] for r in c["reads"]], "x--", label=f"{key} p99")
        a.set_xscale("log")
        a.set_yscale("log")
        a.set_xlabel("author's followers (active and inactive)")
        a.set_ylabel("post -> visible to every active follower (ms)")
        a.set_title("Fan-out time vs follower count")
        a.legend()
        a.grid(alpha=0.3)
        b.set_xlabel("followees of the viewer (authors in its mode)")
        b.set_ylabel("feed first page (ms)")
        b.set_title("Feed read vs followee count")
        b.legend(fontsize=8)
        b.grid(alpha=0.3)
        fig.tight_layout()
        name = f"{prefix}-curves.png"
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        made["curves"] = name
    sweep = results.get("sweep") or {}
    if sweep:
        rows = sorted(sweep.values(), key=lambda r: r["threshold"])
        fig, a = plt.subplots(figsize=(8, 4))
        xs = [r["threshold"] for r in rows]
        a.plot(
            xs,
            [r["entries_per_ordinary_post"] for r in rows],
            "o-",
            label="timeline writes per ordinary post",
        )
        a.set_xscale("log")
        a.set_xlabel("FANOUT_PULL_THRESHOLD")
        a.set_ylabel("timeline writes per ordinary post")
        b2 = a.twinx()
        b2.plot(
            xs,
            [r["reads"]["p99_ms"] for r in rows],
            "s--",
            color="tab:red",
            label="feed read p99 (ms)",
        )
        b2.set_ylabel("feed read p99 (ms)")
        a.set_title("Threshold sweep")
        fig.legend(loc="upper center", fontsize=8)
        fig.tight_layout()
        name = f"{prefix}-sweep.png"
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        made["sweep"] = name
    strat = (results.get("compare") or {}).get("strategies") or {}
    if strat:
        fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
        labels = [k for k in strat]
        a.bar(
            labels,
            [max(1e-3, s["entries_per_ordinary_post"]) for s in strat.values()],
            label="ordinary post",
        )
        celeb = [max(s["entries_per_celebrity_post"] or [0]) for s in strat.values()]
        a.bar(labels, [max(1e-3, c) for c in celeb], alpha=0.5, label="celebrity post")
        a.set_yscale("log")
        a.set_ylabel("timeline writes per post (log)")
        a.set_title("Write amplification")
        a.legend(fontsize=8)
        reads = {k: s["reads"] for k, s in strat.items()}
        if results["compare"].get("naive_reads"):
            reads["naive join"] = results["compare"]["naive_reads"]
        b.bar([x for x in reads], [r["p50_ms"] for r in reads.values()], label="p50")
        b.bar([x for x in reads], [r["p99_ms"] for r in reads.values()], alpha=0.5, label="p99")
        b.set_ylabel("feed first page (ms)")
        b.set_title("Feed reads")
        b.legend(fontsize=8)
        for ax in (a, b):
            ax.tick_params(axis="x", labelrotation=20, labelsize=8)
        fig.tight_layout()
        name = f"{prefix}-strategies.png"
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        made["strategies"] = name
    return made


def markdown(results: dict[str, Any], images: dict[str, str]) -> str:
    meta = results["meta"]
    lim = results.get("limits") or {}
    lines = [
        f"# Benchmark report: scale `{meta['scale']}`",
        "",
        f"Command: `{meta['command']}`  ",
        f"Run: {meta['started']} UTC, {meta.get('seconds', float('nan')):.0f} s; machine: {meta['machine']}",
        "",
        "## The network",
        "",
        f"{meta['users']:,} users, {meta['follows']:,} follows (Zipf follower distribution, "
        f"exponent {meta['zipf_exponent']}), {meta['active_users']:,} active within 30 days "
        f"({meta['active_users'] / meta['users']:.0%}; the rest get no timeline and no fan-out); "
        f"planted: the celebrity (user 1, {meta['celebrity']:,} followers), the 50k author "
        f"(user 2, {meta['big']:,}), fan-out curve authors {meta['ladder']}. "
        f"Generation: {meta['generation']}.",
        "",
    ]
    bench = (lim.get("lpush") or {}).get("rps")
    zadd = lim.get("zadd") or {}
    if lim:
        lines += ["## Raw limits of the same servers (same run)", "",
                  "| limit | figure |", "|---|---:|"]  # fmt: skip
        if bench:
            lines.append(f"| redis-benchmark LPUSH (50 clients, no pipeline) | {bench:,.0f} /s |")
        else:
            lines.append("| redis-benchmark | binary not found: redis-py pipelined ZADD only |")
        for k, v in zadd.items():
            lines.append(f"| {k} | {v:,.0f} /s |")
        for enc, size in (lim.get("timeline_800_bytes") or {}).items():
            lines.append(f"| one 800-entry timeline, {enc} (MEMORY USAGE) | {size:,} B |")
        pk = lim["pk_fetch"]
        lines.append(f"| PostgreSQL primary-key fetch (asyncpg, prepared, 1 connection) | "
                     f"{pk['rps']:,.0f} /s, p50 {_ms(pk['p50_ms'])}, p99 {_ms(pk['p99_ms'])} |")  # fmt: skip
        bare = lim["bare_http"]
        lines.append(f"| bare HTTP endpoint (uvicorn + Starlette /healthz, 4 clients) | p50 "
                     f"{_ms(bare['p50_ms'])}, p99 {_ms(bare['p99_ms'])}, "
                     f"{bare['cpu_ms']:.2f} CPU ms/request |")  # fmt: skip
        lines.append("")
    comp = results.get("compare") or {}
    strat = comp.get("strategies") or {}
    bare_p50 = (lim.get("bare_http") or {}).get("p50_ms")
    if strat:
        lines += [
            "## 1. Strategy comparison (same graph, same post stream)",
            "",
            f"The stream: {meta['stream']}. Post-to-visible: createPost request sent -> the last "
            "timeline written (push) or the post indexed under its author (pull), from the ARQ "
            "jobs' results. Timeline writes: entries holding the post counted in every active "
            "user's timeline after the run. Reads: feed first page (20, CHRONOLOGICAL) over "
            "HTTP, random active viewers, closed loop; CPU per read: the API process, "
            "redis-server and the database's PostgreSQL backends.",
            "",
            "| strategy | timeline writes / ordinary post | writes / celebrity post | Redis "
            "commands / post | Redis memory (delta) | ordinary post-to-visible p50 | p99 | "
            "celebrity post-to-visible | feed read p50 | p99 | CPU ms / read (API + Redis + PG) | "
            "correct |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for s in strat.values():
            r = s["reads"]
            cpu = r["cpu_ms"]
            celeb = s["entries_per_celebrity_post"]
            cv = s["celebrity_visible_ms"]
            lines.append(
                f"| {s['label']} | {s['entries_per_ordinary_post']:,.1f} | "
                f"{max(celeb) if celeb else 0:,} of {max(s['celebrity_active_followers'] or [0]):,}"
                f" active | {s['redis_commands_per_post']:,.1f} | {s['redis_memory_mb']:,.1f} MB "
                f"({s['redis_memory_delta_mb']:+,.1f}) | {_ms(s['visible_p50_ms'])} | "
                f"{_ms(s['visible_p99_ms'])} | {_ms(max(cv)) if cv else 'n/a'} | "
                f"{_ms(r['p50_ms'])}{_ratio(r['p50_ms'], bare_p50)} | {_ms(r['p99_ms'])} "
                f"(n={r['reads']}{', ' + str(r['errors']) + ' failed' if r['errors'] else ''}) | "
                f"{cpu['service']:.2f} + {cpu['redis']:.2f} + {cpu['postgres']:.2f} | "
                f"{'yes' if s['check_ok'] else 'NO: ' + '; '.join(s['problems'][:3])} |"
            )
        naive = comp.get("naive_reads")
        if naive:
            cpu = naive["cpu_ms"]
            lines.append(
                f"| naive SQL join (follows JOIN posts ORDER BY created_at DESC LIMIT 20) | 0 | 0 "
                f"| 0 | 0 | 0 (the query reads the posts table) | 0 | 0 | "
                f"{_ms(naive['p50_ms'])}{_ratio(naive['p50_ms'], bare_p50)} | "
                f"{_ms(naive['p99_ms'])} | {cpu['service']:.2f} + {cpu['redis']:.2f} + "
                f"{cpu['postgres']:.2f} | n/a |"
            )
        lines += ["", "(x): the read's p50 as a multiple of the bare HTTP endpoint's p50.", ""]
        if "strategies" in images:
            lines += [f"![strategies]({images['strategies']})", ""]
    burst = results.get("burst") or {}
    if burst:
        lines += [
            "## 2. Celebrity burst",
            "",
            f"{meta['burst']}. Ordinary posts' post-to-visible, and the lanes' lag (age of the "
            "oldest queued job) sampled every 0.5 s.",
            "",
            "| strategy | ordinary posts | p50 | p99 | max | within 500 ms | within 5 s | "
            "celebrity posts visible (slowest) | timeline writes / celebrity post (most) | worst lane lag | "
            "all settled | correct |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for r in burst.values():
            worst = max((max(d, b) for _, d, b in r["lag"]), default=0.0)
            lines.append(
                f"| {r['label']} | {r['ordinary_posts']} | {_ms(r['visible_p50_ms'])} | "
                f"{_ms(r['visible_p99_ms'])} | {_ms(r['visible_max_ms'])} | "
                f"{r['within_500ms']:.0%} | {r['within_5s']:.0%} | "
                f"{_ms(max(r['celebrity_visible_ms'] or [float('nan')]))} | "
                f"{max(r['entries_per_celebrity_post'] or [0]):,} | {worst:.1f} s | "
                f"{r['seconds']:.1f} s | {'yes' if r['check_ok'] else 'NO'} |"
            )
        lines.append("")
        for key in ("burst_lag", "burst_visible"):
            if key in images:
                lines += [f"![{key}]({images[key]})", ""]
    curves = {k: v for k, v in (results.get("curves") or {}).items() if k in ("push", "pull")}
    if curves:
        lines += ["## 3. Scaling curves", "", "In the constant hybrid, with the curve's authors "
                  "pinned push, then pull (`python -m app.fanout pin`). Fan-out: one post at a "
                  "time from authors of growing follower counts (createPost sent -> visible to "
                  "every active follower).", "",
                  *([meta["curves_note"], ""] if meta.get("curves_note") else []),
                  "| followers | " + " | ".join(curves) + " |",
                  "|---:|" + "---:|" * len(curves)]  # fmt: skip
        first = next(iter(curves.values()))
        for i, p in enumerate(first["fanout"]):
            cells = [_ms(c["fanout"][i]["visible_ms"]) for c in curves.values()]
            lines.append(f"| {p['followers']:,} | " + " | ".join(cells) + " |")
        lines += ["", "Feed read (first page, 1 client) of the viewer following exactly k "
                  "authors, each with two posts, the authors pushed or pulled: p50 / p99.", "",
                  "| k followees | " + " | ".join(curves) + " | extra p99, pull - push |",
                  "|---:|" + "---:|" * (len(curves) + 1)]  # fmt: skip
        for i, r in enumerate(first["reads"]):
            cells = [f"{_ms(c['reads'][i]['p50_ms'])} / {_ms(c['reads'][i]['p99_ms'])}"
                     for c in curves.values()]  # fmt: skip
            extra = ""
            if "pull" in curves and "push" in curves:
                extra = _ms(
                    curves["pull"]["reads"][i]["p99_ms"] - curves["push"]["reads"][i]["p99_ms"]
                )
            lines.append(f"| {r['followees']} | " + " | ".join(cells) + f" | {extra} |")
        lines.append("")
        if "curves" in images:
            lines += [f"![curves]({images['curves']})", ""]
    sweep = results.get("sweep") or {}
    if sweep:
        lines += ["### Threshold sweep", "", f"The first {meta['sweep_posts']} ordinary posts "
                  "of the stream plus its celebrity posts, per FANOUT_PULL_THRESHOLD (push "
                  "threshold at 80% of it).", "",
                  "| FANOUT_PULL_THRESHOLD | pull-mode authors | timeline writes / ordinary post "
                  "| / celebrity post | ordinary p99 visible | feed read p50 | p99 | correct |",
                  "|---:|---:|---:|---:|---:|---:|---:|---|"]  # fmt: skip
        for r in sorted(sweep.values(), key=lambda r: r["threshold"]):
            lines.append(
                f"| {r['threshold']:,} | {r['pull_authors']:,} | "
                f"{r['entries_per_ordinary_post']:,.1f} | "
                f"{max(r['entries_per_celebrity_post'] or [0]):,} | "
                f"{_ms(r['visible_p99_ms'])} | {_ms(r['reads']['p50_ms'])} | "
                f"{_ms(r['reads']['p99_ms'])} | {'yes' if r['check_ok'] else 'NO'} |"
            )
        lines.append("")
        if "sweep" in images:
            lines += [f"![sweep]({images['sweep']})", ""]
    checks = results.get("problems") or []
    lines += ["## Correctness", "", "After every stream: every pushed post is exactly once in "
              "the timeline of every active follower and of no one else; every pulled post is "
              "once in its author's index and on the feed (read over the API) of a sample of "
              "its followers; no inactive user holds a timeline; no job left queued, none "
              "dead-lettered, no traceback in any process's log.", "",
              "Result: " + ("every check passed." if not checks else "FAILED: " + "; ".join(checks[:10])),
              ""]  # fmt: skip
    return "\n".join(lines)
