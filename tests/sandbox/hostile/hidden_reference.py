"""Hostile: hand the reference in as data (a whole chapter file).

``PARAMS["blob"]`` is the reference, compressed with zlib and encoded in base64, as the test
makes it; this file opens it with ``exec`` into a namespace of its own and hands out
wrappers with the chapter's signatures, written here. Its own syntax shares almost nothing
with the reference: similarity once scored it 0.01 and flagged nothing (issue 47), while a
plain copy scores 1.00. It must be flagged, and compared as the code that runs.
"""

PARAMS = {}  # the test writes what this file is told here

import base64 as _b64
import zlib as _z

_inside = {"__name__": "ch13_leases"}
exec(_z.decompress(_b64.b64decode(PARAMS["blob"])).decode(), _inside)  # noqa: S102

LEASE_MIGRATIONS = _inside["LEASE_MIGRATIONS"]
Claim = _inside["Claim"]


def percentile(values, q):
    return _inside["percentile"](values, q)


def false_expiry_share(turns, lease):
    return _inside["false_expiry_share"](turns, lease)


def shortest_lease(turns, target):
    return _inside["shortest_lease"](turns, target)


def detection_delay(lease, turn, scan):
    return _inside["detection_delay"](lease, turn, scan)


def outlive_curve(turns, leases):
    return _inside["outlive_curve"](turns, leases)


def fenced(writer_generation, current_generation):
    return _inside["fenced"](writer_generation, current_generation)


def open_worker_shop(path):
    return _inside["open_worker_shop"](path)


def enqueue(queue, source_id, session_id, text):
    return _inside["enqueue"](queue, source_id, session_id, text)


def claim(db, owner, *, ttl=90, now=None):
    return _inside["claim"](db, owner, ttl=ttl, now=now)


def assert_current(connection, held, now=None):
    return _inside["assert_current"](connection, held, now)


def observe(db, held, message):
    return _inside["observe"](db, held, message)


def finish(db, held, status, result):
    return _inside["finish"](db, held, status, result)


def recover_once(db, *, owner, supplier, policy, ttl=30):
    return _inside["recover_once"](db, owner=owner, supplier=supplier, policy=policy, ttl=ttl)


def reconcile(db, supplier):
    return _inside["reconcile"](db, supplier)


def cancel(db, work_id, *, actor, policy, reason, now=None):
    return _inside["cancel"](db, work_id, actor=actor, policy=policy, reason=reason, now=now)
