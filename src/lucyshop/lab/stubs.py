"""The error every unfinished learner function raises."""


class NotStarted(NotImplementedError):
    """A learner stub that has not been written yet.

    It names the function and the notebook section that teaches it, so the first thing a
    student sees is where to read, not a traceback into code they have not touched.
    """

    def __init__(self, function: str, section: str) -> None:
        self.function = function
        self.section = section
        super().__init__(
            f"{function}() is not started: read notebook {section}, "
            f"then replace the `raise NotStarted(...)` line in learner/ch13_leases.py"
        )
