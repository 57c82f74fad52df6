"""``python -m lucyshop.lab.experiment``: run the Part A experiment, or verify a receipt.

    python -m lucyshop.lab.experiment --out FILE [--backend embedded|ollama] [--model M]
        [--gguf PATH] [--recovery-models A,B] [--pilot 40] [--trials 24] [--pilot-after 16]
        [--kills 10] [--max-tokens 256] [--seed S] [--quick] [--impl solutions|learner|PATH]
    python -m lucyshop.lab.experiment verify FILE [--impl learner|solutions|PATH]

Both default to ``--impl learner``: the figures are computed, and recomputed, by the chapter
functions of the implementation named, never the reference unless it is named.

Exit status: 0 done (or the receipt verified), 1 the receipt failed verification, 2 the model
or its server is missing (one sentence says how to get it), 3 the implementation is still a stub.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lucyshop.lab.experiment.receipt import verify
from lucyshop.lab.experiment.run import Settings, run, summary
from lucyshop.lab.given.stubs import NotStarted
from lucyshop.lab.loader import (
    ImplementationError,
    add_impl_option,
    block_for,
    impl_path,
    load_impl,
)
from lucyshop.lab.model.backend import DEFAULT_OLLAMA_MODEL, MEASURING
from lucyshop.lab.services.processes import end_children_on_sigterm
from lucyshop.lab.statuses import Mark, result_line
from lucyshop.models import ModelUnavailable

# 24 rounds: a multiple of the eight task kinds, so each rule meets each kind three times, as
# the 40-turn pilot meets each five times. A full run takes about 30 minutes on 2 cores.
DEFAULTS = {"pilot": 40, "trials": 24, "pilot_after": 16, "kills": 10, "max_tokens": 256}
QUICK = {"pilot": 6, "trials": 3, "pilot_after": 3, "kills": 2, "max_tokens": 32}


def count(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 1000:
        raise argparse.ArgumentTypeError(f"a count from 1 to 1000, not {value}")
    return value


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(
        prog="python -m lucyshop.lab.experiment",
        description="Part A on real model turns: pilot, false expiry, detection, recovery.",
        epilog="python -m lucyshop.lab.experiment verify FILE recomputes a receipt's figures.",
    )
    parse.add_argument("--out", type=Path, required=True, help="where to write the receipt (JSON)")
    parse.add_argument("--backend", choices=MEASURING, default="embedded")
    parse.add_argument("--model", help=f"the Ollama model (default {DEFAULT_OLLAMA_MODEL})")
    parse.add_argument(
        "--gguf", help="the embedded backend's GGUF file (default: SmolLM2-135M-Instruct)"
    )
    parse.add_argument(
        "--recovery-models", help="comma-separated models for phase 4 (default: the model)"
    )
    parse.add_argument("--pilot", type=count, help="pilot turns (default 40; --quick 6)")
    parse.add_argument(
        "--trials",
        type=count,
        help="trials per lease rule and recovery samples (default 24; --quick 3)",
    )
    parse.add_argument(
        "--pilot-after", type=count, help="pilot turns after the trials (default 16; --quick 3)"
    )
    parse.add_argument(
        "--kills",
        type=count,
        help="detection kills under each of two leases (default 10; --quick 2)",
    )
    parse.add_argument(
        "--max-tokens", type=count, help="token cap of every turn (default 256; --quick 32)"
    )
    parse.add_argument("--seed", type=int, default=13)
    parse.add_argument(
        "--quick",
        action="store_true",
        help="a small run: 6 pilot turns, 3 trials a rule, 2 kills a lease, 32 tokens a turn",
    )
    add_impl_option(parse)
    return parse


def settings_from(args: argparse.Namespace, parse: argparse.ArgumentParser) -> Settings:
    if args.backend == "embedded" and args.model:
        parse.error("--model names an Ollama model; the embedded backend takes --gguf PATH")
    if args.backend == "ollama" and args.gguf:
        parse.error("--gguf is for the embedded backend; name an Ollama model with --model")
    model = args.gguf if args.backend == "embedded" else args.model or DEFAULT_OLLAMA_MODEL
    names = [name.strip() for name in (args.recovery_models or "").split(",") if name.strip()]
    recovery = tuple(dict.fromkeys(names)) or (model,)
    sizes = QUICK if args.quick else DEFAULTS
    try:
        impl = impl_path(args.impl)
    except ImplementationError as error:
        parse.error(str(error))
    return Settings(
        out=args.out,
        backend=args.backend,
        model=model,
        recovery_models=recovery,
        pilot=args.pilot or sizes["pilot"],
        trials=args.trials or sizes["trials"],
        pilot_after=args.pilot_after or sizes["pilot_after"],
        kills=args.kills or sizes["kills"],
        max_tokens=args.max_tokens or sizes["max_tokens"],
        seed=args.seed,
        impl=impl,
        quick=args.quick,
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["verify"]:
        verifying = argparse.ArgumentParser(
            prog="python -m lucyshop.lab.experiment verify",
            description="Recompute every figure of a receipt.",
        )
        verifying.add_argument("receipt", type=Path)
        add_impl_option(verifying)
        args = verifying.parse_args(argv[1:])
        try:
            block_for(args.impl)  # verifying, like the run, may use only the chosen file
            return verify(args.receipt, load_impl(args.impl))
        except ImplementationError as error:
            verifying.error(str(error))
        except NotStarted as stub:
            again = "or verify with --impl solutions"
            print(result_line(Mark.NOT_STARTED, str(stub), again), file=sys.stderr)
            return 3
    parse = parser()
    settings = settings_from(parse.parse_args(argv), parse)
    block_for(settings.impl)  # this process, like its children, may use only the chosen file
    end_children_on_sigterm()  # a kill of this process still ends the workers it started
    try:
        receipt = run(settings, argv)
    except ModelUnavailable as missing:
        print(missing, file=sys.stderr)
        return 2
    except NotStarted as stub:
        print(result_line(Mark.NOT_STARTED, str(stub)), file=sys.stderr)
        return 3
    print(summary(receipt, settings.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
