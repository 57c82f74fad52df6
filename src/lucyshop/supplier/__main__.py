"""``python -m lucyshop.supplier``: run one supplier server until SIGTERM or SIGINT."""

from lucyshop.supplier.server import main

raise SystemExit(main())
