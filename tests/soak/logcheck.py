#!/usr/bin/env python3
# SPDX-License-Identifier: ISC
"""Summarise the broker's JSON-lines log after a soak run (scripts/soak).

Reads the whole log (streaming; millions of lines are fine) and prints one
JSON object: the number of lines that are not JSON event objects, the
request ids seen, how many of them do not have exactly one egress.decision
and exactly one egress.close (with up to five examples of each kind), the
decisions per instance, verdict and reason counts per instance, the close
errors, and the egress.config events by status.

Usage: logcheck.py LOG"""

import collections
import json
import sys


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    dec = collections.Counter()
    clo = collections.Counter()
    per_inst = collections.Counter()
    reasons = collections.Counter()
    close_err = collections.Counter()
    config = collections.Counter()
    events = collections.Counter()
    bad_lines = 0
    bad_example = None
    with open(sys.argv[1], "rb") as f:
        for raw in f:
            try:
                ev = json.loads(raw)
            except ValueError:
                bad_lines += 1
                bad_example = bad_example or raw[:200].decode("latin-1")
                continue
            if not isinstance(ev, dict) or "event" not in ev:
                bad_lines += 1
                continue
            e = ev["event"]
            events[e] += 1
            if e == "egress.decision":
                rid = ev.get("request_id")
                dec[rid] += 1
                inst = ev.get("instance")
                per_inst[inst] += 1
                r = ev.get("reason") if ev.get("verdict") == "deny" else "-"
                reasons["%s %s %s" % (inst, ev.get("verdict"), r)] += 1
            elif e == "egress.close":
                clo[ev.get("request_id")] += 1
                close_err[str(ev.get("error"))] += 1
            elif e == "egress.config":
                config[str(ev.get("status"))] += 1
    ids = set(dec) | set(clo)
    unpaired = {"decision_0": [], "decision_2plus": [], "close_0": [],
                "close_2plus": []}
    counts = {k: 0 for k in unpaired}
    for rid in ids:
        for name, c in (("decision", dec[rid]), ("close", clo[rid])):
            kind = None
            if c == 0:
                kind = name + "_0"
            elif c > 1:
                kind = name + "_2plus"
            if kind:
                counts[kind] += 1
                if len(unpaired[kind]) < 5:
                    unpaired[kind].append(rid)
    out = {
        "bad_lines": bad_lines,
        "bad_example": bad_example,
        "request_ids": len(ids),
        "decisions": sum(dec.values()),
        "closes": sum(clo.values()),
        "unpaired_counts": counts,
        "unpaired_examples": unpaired,
        "decisions_per_instance": dict(sorted(per_inst.items())),
        "verdicts": dict(sorted(reasons.items())),
        "close_errors": dict(sorted(close_err.items())),
        "config": dict(sorted(config.items())),
        "events": dict(sorted(events.items())),
    }
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
