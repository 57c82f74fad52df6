"""The exercise book (13c): its command line, the measured exercises' runs and their receipts."""
