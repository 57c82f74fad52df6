"""The lab: what checks, grades, measures and teaches chapter 13. The shop itself (the runtime:
store, queue, approval, the supplier, models, status) never imports it.

The words the lab uses (check, row, case, judge, verdict, receipt, ...) are the README's
glossary ("Words"); what each room holds is ``docs/instructors.md``'s layout.
"""

from lucyshop.lab.given.stubs import NotStarted

__all__ = ["NotStarted"]
