"""The supplier (chapter 12): its server process, with its ledger, and the shop's client.

``lucyshop.supplier.server`` is the HTTP process and its SQLite ledger; ``.client`` is what the
shop talks to it with. Both are runtime: the launcher that runs one for a test or an experiment
is ``lucyshop.lab.services.suppliers.supplier_process``.

    python -m lucyshop.supplier --database FILE --port 0 --ready FILE [--identity NAME]
        [--drop-rate P] [--delay-rate P] [--delay-seconds S] [--seed N] [--reject-skus a,b]
"""

from lucyshop.supplier.client import (
    MAX_REPLY_BYTES,
    RECEIPT_FIELDS,
    SupplierClient,
    SupplierRefused,
    SupplierUnavailable,
)
from lucyshop.supplier.server import (
    MAX_BODY_BYTES,
    MAX_DELAY_SECONDS,
    Faults,
    Ledger,
    OperationConflict,
    SupplierServer,
    ledger_orders,
    main,
)

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_DELAY_SECONDS",
    "MAX_REPLY_BYTES",
    "RECEIPT_FIELDS",
    "Faults",
    "Ledger",
    "OperationConflict",
    "SupplierClient",
    "SupplierRefused",
    "SupplierServer",
    "SupplierUnavailable",
    "ledger_orders",
    "main",
]
