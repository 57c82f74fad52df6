"""What a soak prints and writes: its figures, one line per invariant, and the rerun command."""

from __future__ import annotations

import json
import shlex
from collections import Counter
from pathlib import Path
from typing import Any

from lucyshop.lab.statuses import Mark, result_line
from lucyshop.proof.soak.chaos import CHAOS_EVERY, PAUSE_SHARE, Config, Soak
from lucyshop.proof.soak.invariants import Evidence, Finding
from lucyshop.validate import owner_of


def facts(soak: Soak, ev: Evidence) -> dict[str, Any]:
    """Every figure of the report, each counted from what this run observed."""
    return (
        _run_figures(soak)
        | _lease_figures(ev)
        | _supplier_figures(soak, ev)
        | {"scripted": soak.script.figures(ev.events)}
    )


def _run_figures(soak: Soak) -> dict[str, Any]:
    """What was asked for and what the chaos loop did."""
    config, c = soak.config, soak.counts
    return {
        "seed": config.seed,
        "seconds": config.seconds,
        "workers": config.workers,
        "items": config.items,
        "sessions": config.sessions,
        "lease": config.lease,
        "supplier_timeout": config.timeout,
        "impl": str(config.impl),
        "kills": c.kills,
        "pauses": c.pauses,
        "resumes": c.resumes,
        "exited_while_paused": c.exited_while_paused,
        "restarts": c.restarts,
        "chaos_skipped": c.skipped,
        "crashes": len(c.crashes),
        "worker_processes": sum(s.starts for s in soak.slots),
    }


def _lease_figures(ev: Evidence) -> dict[str, Any]:
    """Claims, takeovers and the stale writes the fence refused (by whom, at which boundary)."""
    history, refused = ev.history, [e for e in ev.logged("write") if not e["ok"]]
    owner_of_log = {e["log"]: e["owner"] for e in ev.logged("start")}
    holder = {(h["work_id"], h["generation"]): owner_of(str(h["worker_id"])) for h in history}
    same_owner = sum(
        1
        for e in refused
        if (e.get("lease_gen") or 0) > e["gen"]
        and holder.get((e["work_id"], e["lease_gen"])) == owner_of_log.get(e["log"])
    )
    return {
        "claims": len(history),
        "takeovers": sum(1 for h in history if (h["generation"] or 0) > 1),
        "stale_writes_refused": len(refused),
        "stale_refused_by_boundary": dict(sorted(Counter(e["b"] for e in refused).items())),
        "stale_refused_superseded": sum(1 for e in refused if (e.get("lease_gen") or 0) > e["gen"]),
        "stale_probes": sum(1 for e in refused if e.get("probe")),
        "stale_refused_same_owner": same_owner,
        "writes_accepted": sum(1 for e in ev.logged("write") if e["ok"]),
    }


def _supplier_figures(soak: Soak, ev: Evidence) -> dict[str, Any]:
    """Faults injected, sends, orders, outcomes and money, as the drain left them."""
    sends, ledger, orders = ev.logged("send"), ev.ledger, ev.orders
    ordered = {r["operation"] for r in ledger}
    return {
        "replies_dropped": soak.supplier_faults.get("dropped"),
        "replies_delayed": soak.supplier_faults.get("delayed"),
        "sends": len(sends),
        "repeated_sends": len(sends) - len({e["op"] for e in sends}),
        "orders": len(ledger),
        "orders_accepted": sum(1 for r in ledger if r["status"] == "ACCEPTED"),
        "outcomes": dict(sorted(ev.statuses.items())),
        "uncertain_left": sum(1 for o in orders if o["status"] in ("SENDING", "UNKNOWN")),
        "assignments_without_order": soak.admitting
        - len({o["work_id"] for o in orders if o["operation"] in ordered}),
        "spent_cents": ev.money["spent_cents"],
        "reserved_cents": ev.money["reserved_cents"],
        "drain": soak.drain,
    }


def rerun_command(config: Config) -> str:
    words = [
        "python",
        "-m",
        "lucyshop.proof.soak",
        "--seconds",
        f"{config.seconds:g}",
        "--seed",
        str(config.seed),
        "--impl",
        config.impl_spec,
        "--workers",
        str(config.workers),
        "--items",
        str(config.items),
        "--lease",
        f"{config.lease:g}",
    ]
    if config.chaos_every != CHAOS_EVERY or config.pause_share != PAUSE_SHARE:
        words += [
            "--chaos-every",
            f"{config.chaos_every:g}",
            "--pause-share",
            f"{config.pause_share:g}",
        ]
    for boundary in config.stale:
        words += ["--stale", boundary]
    command = shlex.join(words)
    defaults = (config.impl_spec, config.workers, config.items, config.lease) == (
        "solutions",
        4,
        400,
        1.5,
    )
    plain = (config.chaos_every, config.pause_share, config.stale) == (CHAOS_EVERY, PAUSE_SHARE, ())
    if defaults and plain:
        return f"make soak SOAK_SECONDS={config.seconds:g} SEED={config.seed}   (or: {command})"
    return command


def print_report(config: Config, f: dict[str, Any], findings: list[Finding], took: float) -> None:
    by = ", ".join(f"{b} {n}" for b, n in f["stale_refused_by_boundary"].items())
    drain = f["drain"]
    print(
        f"seed {f['seed']}: {f['seconds']:g}s of chaos, {f['workers']} workers, {f['items']} "
        f"assignments in {f['sessions']} sessions, lease {f['lease']:g}s, supplier timeout "
        f"{f['supplier_timeout']:g}s"
    )
    gone = f", {f['exited_while_paused']} had exited" if f["exited_while_paused"] else ""
    print(
        f"chaos: kills {f['kills']}, pauses {f['pauses']} (continued {f['resumes']}{gone}), "
        f"restarts {f['restarts']}, worker processes {f['worker_processes']}, events skipped "
        f"{f['chaos_skipped']}"
    )
    print(
        f"leases: claims {f['claims']}, takeovers {f['takeovers']}, stale writes refused "
        f"{f['stale_writes_refused']} ({by or 'none'}; {f['stale_refused_superseded']} superseded, "
        f"{f['stale_refused_same_owner']} of them by the same owner label, "
        f"{f['stale_probes']} deliberate probes)"
    )
    print(
        f"supplier: replies dropped {f['replies_dropped']}, delayed {f['replies_delayed']}, worker "
        f"sends {f['sends']} ({f['repeated_sends']} repeats answered from the ledger), orders "
        f"{f['orders']} ({f['orders_accepted']} accepted)"
    )
    print(
        f"drain: {drain.get('seconds')}s, recover_once {drain.get('recover_once')}, reconcile "
        f"settled {drain.get('reconciled')}; outcomes {f['outcomes']}; spent {f['spent_cents']} "
        f"reserved {f['reserved_cents']} cents"
    )
    for row in f["scripted"]:
        print(
            f"scripted: a stale {row['boundary']} write of work {row['work_id']} by generation "
            f"{row['generation']} after generation {row['superseded_by']} took over: "
            f"{row['outcome']}" + (f" (armed again {row['rearmed']}x)" if row["rearmed"] else "")
        )
    for v in findings:
        ids = (
            " (work ids "
            f"{', '.join(map(str, v.work_ids[:20]))}{' ...' if len(v.work_ids) > 20 else ''})"
            if v.work_ids and not v.ok
            else ""
        )
        print(result_line(Mark.PASS if v.ok else Mark.FAIL, v.invariant, f"{v.detail}{ids}"))
    failed = [v.invariant for v in findings if not v.ok]
    print(f"soak {'FAILED: ' + '; '.join(failed) if failed else 'passed'} ({took:.0f}s)")
    print(f"rerun: {rerun_command(config)}")


def write_report(
    path: Path, config: Config, figures: dict[str, Any], findings: list[Finding]
) -> None:
    """The figures and findings as JSON, for tests and for keeping."""
    path.parent.mkdir(parents=True, exist_ok=True)
    passed = all(v.ok for v in findings)
    findings_json = [v.__dict__ | {"work_ids": list(v.work_ids)} for v in findings]
    report = figures | {"passed": passed, "rerun": rerun_command(config), "findings": findings_json}
    path.write_text(json.dumps(report, indent=2, default=str) + "\n")
