"""Hostile: use what the trusted side never meant to offer on the objects it hands a sandbox
(appended to the reference with both of the kit's "holder check in its own transaction"
mutants applied, ``observe`` and ``finish``).

- ``observe`` and ``finish``, handed the served stand-in, first ask the trusted ``ServedShop``
  behind it to run its rival now (its ``before``), ahead of their holder check: the rival
  would then strike where this file chooses, never in the gap between the mutants' two
  transactions, and both rows passed (issue 47). Then they write as the mutants do.
- ``reach(thing, names)`` asks for each name on an object handed in, over the worker's own
  channel (past what the worker's proxy would send): reads it, and calls it with plausible
  arguments if it is a method. A test hands in each kind of object the kit
  hands a sandbox and asks for every public name beyond what that kind offers.
"""

PARAMS = {}  # the test writes what this file is told here

_ARGUMENTS = {  # plausible arguments for the methods tried
    "before": (1, "BEGIN IMMEDIATE"),
    "wait": (0,),
    "send": (None,),
    "throw": ("boom",),
    "set_faults": (),
    "lookup": ("op-1",),
    "order": ("op-1", {}),
    "execute": ("SELECT 1",),
}


def _ask(thing, name, args):
    """Call back ``name`` on the trusted object behind ``thing`` over the worker's own
    channel, past the proxy's manners (without ``args``: is it a method or a value?)."""
    worker = object.__getattribute__(thing, "_worker")
    handle = object.__getattribute__(thing, "_handle")
    return worker.callback(handle, name, args, None if args is None else {})


def reach(thing, names):
    """What each of ``names`` did on ``thing``: "REACHED", or the error that refused it."""
    found = {}
    for name in names:
        try:
            kind, _value = _ask(thing, name, None)
            if kind == "method":
                _ask(thing, name, _ARGUMENTS.get(name, ()))
            found[name] = "REACHED"
        except Exception as error:  # noqa: BLE001 - each refusal is the answer
            found[name] = f"{type(error).__name__}: {error}"[:300]
    return found


def _steer(db):
    """Ask the trusted side's server to loose its rival now, if it is there to ask."""
    server = getattr(db, "_server", None)
    if server is not None:
        try:
            server.before(1 << 30, "BEGIN IMMEDIATE")  # past any moment: the rival comes now
        except Exception:  # noqa: BLE001, S110 - refused: write anyway
            pass


_split_observe, _split_finish = observe, finish  # noqa: F821 - the reference's, split


def observe(db, held, message):
    _steer(db)
    return _split_observe(db, held, message)


def finish(db, held, status, result):
    _steer(db)
    return _split_finish(db, held, status, result)
